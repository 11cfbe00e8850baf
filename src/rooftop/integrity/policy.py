"""The static gate: rules checked on the solution's AST before any of it runs.

Names are resolved through the file's imports, so `import torch.nn.functional as F; F.softmax`
and `from torch import matmul as mm` are seen for what they are. Runtime audits (dispatch counts,
streams, threads) live beside this module and catch what a static reading cannot.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from rooftop.problem.spec import Policy

# torch calls that allocate or describe tensors but compute nothing: allowed when a problem
# forbids torch compute ops (allow_torch_ops: false)
ALLOCATION_CALLS = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "arange", "tensor", "as_tensor", "from_numpy", "device", "dtype", "Size",
    "get_default_dtype", "is_tensor", "numel", "manual_seed", "no_grad", "inference_mode",
    "set_grad_enabled", "finfo", "iinfo", "Generator",
}
ALLOWED_TORCH_PREFIXES = ("torch.nn.Module", "torch.nn.Parameter", "torch.nn.ParameterList",
                          "torch.nn.ModuleList", "torch.cuda.", "torch.utils.cpp_extension.",
                          "torch.library.", "torch.backends.")


# modules a solution may import (their submodules too); a problem extends this with extra_imports
ALLOWED_IMPORTS = {
    "torch", "triton", "numpy", "math", "cmath", "ctypes", "os", "typing", "typing_extensions", "functools",
    "itertools", "operator", "collections", "dataclasses", "enum", "abc", "__future__", "pathlib", "struct",
    "warnings", "contextlib", "re", "string", "textwrap", "cuda",
}
STREAM_CALLS = {"torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.cuda.stream", "torch.cuda.set_stream",
                "torch.cuda.streams.Stream", "torch.Stream", "torch.cuda.graphs.graph_pool_handle"}
CONCURRENCY_ROOTS = ("threading", "_thread", "concurrent", "multiprocessing", "asyncio", "subprocess",
                     "os.fork", "os.forkpty", "os.spawn", "os.posix_spawn", "os.system", "os.popen")
PROTECTED_ROOTS = ("torch", "time", "triton", "rooftop", "builtins", "numpy", "gc", "sys")
DYNAMIC_CODE = {"exec", "eval", "compile", "__import__", "globals", "breakpoint"}
# attributes that reach the interpreter's frames, globals or class graph: the harness's state
INTROSPECTION = {"_getframe", "f_back", "f_locals", "f_globals", "f_code", "gi_frame", "cr_frame", "tb_frame",
                 "__subclasses__", "__globals__", "__builtins__", "__code__", "__closure__", "_current_frames",
                 "settrace", "setprofile", "get_referrers", "get_objects"}
# names a solution's files may not take: they would be imported in place of the real module
SHADOWABLE = set(sys.stdlib_module_names) | {"torch", "triton", "numpy", "rooftop", "rooftop_reference",
                                             "rooftop_solution", "nvidia", "cuda"}
# native (CUDA/C++) constructs that create streams or threads behind the harness's back
NATIVE_RULES = (
    ("stream", re.compile(r"\b(cudaStreamCreate\w*|cuStreamCreate\w*|getStreamFromPool|getStreamFromExternal)\b")),
    ("thread", re.compile(r"\b(std::thread|std::async|pthread_create|std::jthread)\b")),
)


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"


def check_source(source: str, policy: Policy, filename: str = "solution.py") -> list[Violation]:
    """All policy violations in one Python source. A syntax error raises SyntaxError."""
    tree = ast.parse(source, filename=filename)
    aliases = _aliases(tree)
    forbidden_ops = {f.rsplit(".", 1)[-1] for f in policy.forbidden if f != "@"}
    bare_ops = {op.lstrip("_") for op in forbidden_ops}  # torch._foo and torch.foo are one op to the policy
    forbid_matmul_operator = "@" in policy.forbidden or "matmul" in forbidden_ops
    found: list[Violation] = []
    seen: set[tuple[int, str]] = set()

    def report(rule: str, node: ast.AST, message: str) -> None:
        key = (getattr(node, "lineno", 0), message)
        if key not in seen:
            seen.add(key)
            found.append(Violation(rule, getattr(node, "lineno", 0), message))

    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult) \
                and forbid_matmul_operator:
            report("forbidden-op", node, "the @ operator (matrix multiply) is forbidden by this problem")
        if not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        dotted = _resolve(node, aliases)
        if dotted is None:
            if isinstance(node, ast.Attribute) and node.attr.lstrip("_") in bare_ops and id(node) in called:
                report("forbidden-op", node, f"'.{node.attr}' is forbidden by this problem "
                       f"(Tensor.{node.attr} or a library {node.attr})")
            continue
        last = dotted.rsplit(".", 1)[-1]
        if dotted.startswith("torch") and last.lstrip("_") in bare_ops:
            report("forbidden-op", node, f"'{dotted}' is forbidden by this problem")
        elif not dotted.startswith("torch") and dotted in policy.forbidden:
            report("forbidden-op", node, f"'{dotted}' is forbidden by this problem")
    if not policy.allow_torch_ops:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                dotted = _resolve(node.func, aliases)
                if dotted and dotted.startswith("torch.") and not _allocation(dotted):
                    report("torch-compute", node, f"'{dotted}' computes with torch; this problem "
                           "allows only allocation and metadata calls of torch")
    for rule in (_imports, _concurrency, _patching, _subclasses, _fallbacks, _dynamic_code, _introspection):
        for node, name, message in rule(tree, aliases, policy, forbidden_ops):
            report(name, node, message)
    for source in _inline_strings(tree):
        for rule, line, message in check_native(source):
            found.append(Violation(rule, 0, f"in a load_inline source, line {line}: {message}"))
    return sorted(found, key=lambda v: v.line)


def check_native(source: str) -> list[tuple[str, int, str]]:
    """Stream or thread creation in CUDA/C++ text (load_inline strings and .cu/.cpp files)."""
    hits = []
    for number, line in enumerate(source.splitlines(), 1):
        code = line.split("//", 1)[0]
        for rule, pattern in NATIVE_RULES:
            match = pattern.search(code)
            if match:
                hits.append((rule, number, f"'{match.group(1)}' creates a {rule}; all work must run on the "
                             "caller's current stream, inside the call"))
    return hits


Finding = tuple[ast.AST, str, str]


def _imports(tree: ast.Module, aliases: dict[str, str], policy: Policy, _ops: set[str]) -> list[Finding]:
    allowed = ALLOWED_IMPORTS | set(policy.extra_imports)
    out = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
        for name in names:
            if not any(name == a or name.startswith(a + ".") for a in allowed):
                out.append((node, "import", f"import of '{name}' is not allowed (allowed: torch, triton, numpy, "
                            "ctypes, os and the standard helpers; a problem may add more)"))
    return out


def _concurrency(tree: ast.Module, aliases: dict[str, str], _p: Policy, _ops: set[str]) -> list[Finding]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            dotted = _resolve(node.func, aliases) or ""
            if dotted in STREAM_CALLS:
                out.append((node, "stream", f"'{dotted}': creating or switching CUDA streams is not allowed; "
                            "run on the caller's current stream"))
            elif dotted.startswith(CONCURRENCY_ROOTS):
                out.append((node, "thread", f"'{dotted}': threads and processes are not allowed"))
    return out


def _patching(tree: ast.Module, aliases: dict[str, str], _p: Policy, _ops: set[str]) -> list[Finding]:
    out = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                and node.args:
            targets = [node.args[0]]
        for target in targets:
            dotted = _resolve(target, aliases) or ""
            if dotted.split(".")[0] in PROTECTED_ROOTS and (isinstance(target, ast.Attribute) or
                                                            isinstance(node, ast.Call)):
                out.append((node, "patch", f"assigning to '{dotted}' is not allowed (no patching of torch, "
                            "triton, time or the harness)"))
    return out


def _subclasses(tree: ast.Module, aliases: dict[str, str], _p: Policy, _ops: set[str]) -> list[Finding]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if (_resolve(base, aliases) or "") in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"):
                    out.append((node, "tensor-subclass", f"class {node.name} subclasses torch.Tensor"))
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("__torch_function__", "__torch_dispatch__"):
                    out.append((item, "tensor-subclass", f"{node.name}.{item.name} intercepts torch calls"))
        elif isinstance(node, ast.Attribute) and node.attr in ("_make_subclass", "as_subclass", "_make_wrapper_subclass"):
            out.append((node, "tensor-subclass", f"'.{node.attr}' makes a Tensor subclass"))
    return out


def _fallbacks(tree: ast.Module, aliases: dict[str, str], policy: Policy, ops: set[str]) -> list[Finding]:
    """try/except whose handler computes with torch: a silent fallback to the reference path."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        for handler in node.handlers:
            for inner in ast.walk(handler):
                if isinstance(inner, ast.Call):
                    dotted = _resolve(inner.func, aliases) or ""
                    method = inner.func.attr if isinstance(inner.func, ast.Attribute) and not dotted else ""
                    if (dotted.startswith("torch.") and not _allocation(dotted)) or method in ops:
                        out.append((inner, "fallback", f"'{dotted or '.' + method}' inside an except handler: "
                                    "falling back to torch when the kernel fails is not allowed"))
    return out


def _dynamic_code(tree: ast.Module, aliases: dict[str, str], _p: Policy, _ops: set[str]) -> list[Finding]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_CODE:
            out.append((node, "dynamic-code", f"'{node.func.id}()' runs code the policy cannot read"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "vars") \
                and _computed_lookup(node):
            out.append((node, "dynamic-code", f"'{node.func.id}()' with a computed name reaches an attribute the "
                        "policy cannot read (a forbidden op spelled at run time)"))
    return out


def _computed_lookup(call: ast.Call) -> bool:
    """getattr(obj, <not a string literal>) on anything but self; vars() of a module or class."""
    if call.func.id == "vars":  # type: ignore[union-attr]
        return True
    if len(call.args) < 2 or (isinstance(call.args[0], ast.Name) and call.args[0].id == "self"):
        return False
    name = call.args[1]
    return not (isinstance(name, ast.Constant) and isinstance(name.value, str))


def _introspection(tree: ast.Module, _a: dict[str, str], _p: Policy, _ops: set[str]) -> list[Finding]:
    return [(node, "introspection", f"'.{node.attr}' reaches into the interpreter's frames or objects, "
             "where the harness keeps its state") for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in INTROSPECTION]


def check_file_names(files: list[Path], root: Path) -> list[tuple[Path, Violation]]:
    """Files whose names would shadow a module the harness or the solution imports."""
    out = []
    for path in files:
        stem = path.relative_to(root).parts[0].removesuffix(".py") if path.is_relative_to(root) else path.stem
        if path.suffix == ".py" and stem in SHADOWABLE:
            out.append((path, Violation("shadow", 1, f"a file named '{path.name}' would be imported in place of "
                                        f"the module '{stem}'")))
    return out


def _inline_strings(tree: ast.Module) -> list[str]:
    """Every string constant long enough to be native source (load_inline's sources among them)."""
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and ("{" in n.value and ";" in n.value)]


def _allocation(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1] in ALLOCATION_CALLS or dotted.startswith(ALLOWED_TORCH_PREFIXES) \
        or dotted.startswith("torch.float") or dotted.startswith("torch.int") or dotted == "torch.bfloat16"


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> fully qualified module or object, from every import in the file."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _resolve(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """Dotted name of an attribute chain rooted at an imported name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None
