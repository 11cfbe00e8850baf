"""A candidate solution on disk: its files, their hash, and which kinds of kernel it uses.

Everything here is static (no import of the candidate), so it is safe on the trusted side.
"""

from __future__ import annotations

import ast
import hashlib
from enum import Enum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from rooftop.errors import SolutionError

SOURCE_SUFFIXES = {".py", ".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c"}


class Language(str, Enum):
    pytorch = "pytorch"
    triton = "triton"
    cuda_inline = "cuda_inline"  # torch.utils.cpp_extension.load_inline with cuda_sources
    cpp_inline = "cpp_inline"  # load_inline with C++ sources only
    cuda_nvcc = "cuda_nvcc"  # standalone .cu files built with nvcc, loaded with ctypes


class InlineSources(BaseModel):
    """CUDA/C++ strings passed to load_inline, when they can be read without running the file."""

    cuda: list[str] = []
    cpp: list[str] = []
    resolved: bool = True  # False when some source was built at run time and could not be read


class Solution(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: Path
    entry: Path
    files: list[Path]
    source_hash: str
    languages: list[Language]
    inline: InlineSources = InlineSources()

    @property
    def needs_cuda(self) -> bool:
        return bool({Language.cuda_inline, Language.cuda_nvcc} & set(self.languages))

    @property
    def cu_files(self) -> list[Path]:
        return [f for f in self.files if f.suffix == ".cu"]


def load_solution(path: str | Path) -> Solution:
    path = Path(path)
    if path.is_dir():
        entry = path / "solution.py"
        if not entry.is_file():
            raise SolutionError(f"{path}: a solution folder must contain solution.py")
        files = sorted(f for f in path.rglob("*") if f.is_file() and f.suffix in SOURCE_SUFFIXES
                       and "__pycache__" not in f.parts)
    elif path.is_file():
        if path.suffix != ".py":
            raise SolutionError(f"{path}: a solution is a .py file or a folder with solution.py")
        entry, files = path, [path]
    else:
        raise SolutionError(f"{path}: no such solution file or folder")
    root = path if path.is_dir() else path.parent
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    source = entry.read_text()
    languages, inline = _detect(source, files)
    return Solution(path=path.resolve(), entry=entry.resolve(), files=[f.resolve() for f in files],
                    source_hash=digest.hexdigest(), languages=languages, inline=inline)


def _detect(source: str, files: list[Path]) -> tuple[list[Language], InlineSources]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        # reported by the static gate with its line; the kinds are unknown
        return [Language.pytorch], InlineSources(resolved=False)
    found: list[Language] = []
    imports = _imported_modules(tree)
    if any(m == "triton" or m.startswith("triton.") for m in imports):
        found.append(Language.triton)
    inline = _inline_sources(tree)
    if inline is not None:
        found.append(Language.cuda_inline if inline.cuda or not inline.resolved else Language.cpp_inline)
    if any(f.suffix == ".cu" for f in files):
        found.append(Language.cuda_nvcc)
    return found or [Language.pytorch], inline or InlineSources()


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
    return out


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
