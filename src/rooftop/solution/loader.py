"""A candidate solution on disk: its files, their hash, and which kinds of kernel it uses.

Everything here is static (no import of the candidate), so it is safe on the trusted side.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from rooftop.build.backends import SourceScan, ordered, recognise
from rooftop.errors import SolutionError


def source_suffixes() -> set[str]:
    """The files a solution folder carries: its Python and its language backends' sources."""
    return {".py"} | {suffix for backend in ordered() for suffix in backend.source_suffixes}


SOURCE_SUFFIXES = source_suffixes()


class Language(str, Enum):
    """The names of the built-in language backends (build/backends/): a solution's languages are the
    names of the backends that recognise it, these or any other registered."""

    pytorch = "pytorch"
    triton = "triton"
    cuda_inline = "cuda_inline"  # torch.utils.cpp_extension.load_inline with cuda_sources
    cpp_inline = "cpp_inline"  # load_inline with C++ sources only
    cuda_nvcc = "cuda_nvcc"  # standalone .cu files built with nvcc, loaded with ctypes


def needs_build(languages: Iterable[str]) -> bool:
    """Whether one of them only compiles, and so is worth a build worker's time (else built at load)."""
    return any(backend.compiled for backend in ordered(languages))


class InlineCall(BaseModel):
    """One load_inline call as the file writes it: what torch builds from it (build/inline.py
    compile-checks it on a machine without a GPU with the flags torch would use on one)."""

    name: str | None = None  # None: not a string constant
    cpp: list[str] = []
    cuda: list[str] = []
    functions: list[str] | None = None  # the names bound with pybind11; None: no bindings
    extra_cflags: list[str] = []
    extra_cuda_cflags: list[str] = []
    extra_ldflags: list[str] = []
    extra_include_paths: list[str] = []
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False
    resolved: bool = True  # False when a source, `functions` or a flag could not be read


class InlineSources(BaseModel):
    """CUDA/C++ strings passed to load_inline, when they can be read without running the file."""

    cuda: list[str] = []
    cpp: list[str] = []
    resolved: bool = True  # False when some source was built at run time and could not be read
    calls: list[InlineCall] = []


class Solution(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: Path
    entry: Path
    files: list[Path]
    source_hash: str
    languages: list[str]  # the names of its language backends, in their rank order
    inline: InlineSources = InlineSources()

    @property
    def needs_cuda(self) -> bool:
        """Whether one of its languages runs only on a GPU."""
        return any(backend.needs_gpu for backend in ordered(self.languages))

    @property
    def runtime_modules(self) -> list[str]:
        """The modules its languages import when it loads (started early, they cost no wait)."""
        return sorted({module for backend in ordered(self.languages) for module in backend.runtime_modules})

    @property
    def cu_files(self) -> list[Path]:
        return [f for f in self.files if f.suffix == ".cu"]


def solution_entries(folder: Path) -> list[Path]:
    """The solutions a folder holds: its .py files and its subfolders with a solution.py, sorted."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if (p.suffix == ".py" and p.is_file()) or (p.is_dir() and (p / "solution.py").is_file()))


def hash_sources(files: Iterable[tuple[str, bytes]]) -> str:
    """A solution's source hash: its files' paths (relative to the solution) and bytes, in order."""
    digest = hashlib.sha256()
    for relative, data in files:
        digest.update(relative.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


def load_solution(path: str | Path) -> Solution:
    path = Path(path)
    if path.is_dir():
        entry = path / "solution.py"
        if not entry.is_file():
            raise SolutionError(f"{path}: a solution folder must contain solution.py")
        suffixes = source_suffixes()
        files = sorted(f for f in path.rglob("*") if f.is_file() and f.suffix in suffixes
                       and "__pycache__" not in f.parts)
    elif path.is_file():
        if path.suffix != ".py":
            raise SolutionError(f"{path}: a solution is a .py file or a folder with solution.py")
        entry, files = path, [path]
    else:
        raise SolutionError(f"{path}: no such solution file or folder")
    root = path if path.is_dir() else path.parent
    source_hash = hash_sources((str(f.relative_to(root)), f.read_bytes()) for f in files)
    source = entry.read_text()
    languages, inline = detect(source, files)
    return Solution(path=path.resolve(), entry=entry.resolve(), files=[f.resolve() for f in files],
                    source_hash=source_hash, languages=languages, inline=inline)


def detect(source: str, files: list[Path]) -> tuple[list[str], InlineSources]:
    """The languages and load_inline sources of a solution, read from its entry file's text and its
    files' names alone (nothing is imported or written): each language backend says whether it
    recognises its own."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        # reported by the static gate with its line; the kinds are unknown
        return recognise(None), InlineSources(resolved=False)
    inline = _inline_sources(tree)
    scan = SourceScan(imports=frozenset(_imported_modules(tree)), files=tuple(files), inline=inline)
    return recognise(scan), inline or InlineSources()


def _imported_modules(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def _inline_sources(tree: ast.Module) -> InlineSources | None:
    """Sources of every load_inline call, resolving module-level string constants."""
    constants: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            constants[node.targets[0].id] = node.value
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _callee(n) == "load_inline"]
    if not calls:
        return None
    out = InlineSources()
    for call in calls:
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        positional = dict(zip(("name", "cpp_sources", "cuda_sources"), call.args))
        for key, target in (("cuda_sources", out.cuda), ("cpp_sources", out.cpp)):
            argument = kwargs.get(key, positional.get(key))
            if argument is None:
                continue
            strings = _strings(argument, constants)
            if strings is None:
                out.resolved = False
            else:
                target.extend(strings)
        out.calls.append(_inline_call({**positional, **kwargs}, len(call.args) > 3, constants))
    return out


def _inline_call(arguments: dict[str, ast.expr], more_positional: bool, constants: dict[str, ast.expr]) -> InlineCall:
    """What one call passes; an argument the scan cannot read leaves the call unresolved."""
    given = {k: v for k, v in arguments.items() if not (isinstance(v, ast.Constant) and v.value is None)}
    readable = not more_positional and not any(isinstance(v, ast.Starred) for v in given.values())
    values: dict = {}
    for key, field in (("cpp_sources", "cpp"), ("cuda_sources", "cuda"), ("extra_cflags", "extra_cflags"),
                       ("extra_cuda_cflags", "extra_cuda_cflags"), ("extra_ldflags", "extra_ldflags"),
                       ("extra_include_paths", "extra_include_paths")):
        if key in given:
            strings = _strings(given[key], constants)
            readable = readable and strings is not None
            values[field] = strings or []
    if "name" in given:
        name = _strings(given["name"], constants)
        values["name"] = name[0] if name and len(name) == 1 else None
    if "functions" in given:
        values["functions"] = _function_names(given["functions"], constants)
        readable = readable and values["functions"] is not None
    for key in ("with_pytorch_error_handling", "no_implicit_headers"):
        if key in given:
            node = given[key]
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                values[key] = node.value
            else:
                readable = False
    return InlineCall(**values, resolved=readable)


def _function_names(node: ast.expr, constants: dict[str, ast.expr]) -> list[str] | None:
    """`functions=`: a name, a list of names, or a dict of name to docstring; None: unreadable."""
    if isinstance(node, ast.Name) and node.id in constants:
        node = constants[node.id]
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return keys if len(keys) == len(node.keys) else None
    return _strings(node, constants)


def _strings(node: ast.expr, constants: dict[str, ast.expr], depth: int = 0) -> list[str] | None:
    if depth > 5:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in constants:
        return _strings(constants[node.id], constants, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        parts = [_strings(e, constants, depth + 1) for e in node.elts]
        strings: list[str] = []
        for part in parts:
            if part is None:
                return None
            strings.extend(part)
        return strings
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _strings(node.left, constants, depth + 1), _strings(node.right, constants, depth + 1)
        if left and right and len(left) == len(right) == 1:
            return [left[0] + right[0]]
    return None


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""
