"""The static gate: rules checked on the solution's AST before any of it runs.

Names are resolved through the file's imports, so `import torch.nn.functional as F; F.softmax`
and `from torch import matmul as mm` are seen for what they are. Runtime audits (dispatch counts,
streams, threads) live beside this module and catch what a static reading cannot.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooftop.build.backends import family_markers, family_suffixes
from rooftop.integrity.native_policy import check_native
from rooftop.plugins import Registry
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
# kernel-to-kernel tasks: what each language's kernels are made with, and what belongs to the other
# (as their language backends name them)
TRITON_KERNEL = family_markers("triton")
CUDA_BUILDERS = family_markers("cuda")
NATIVE_SUFFIXES = family_suffixes("cuda") | {".ptx"}  # PTX too, which no solution folder carries


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.rule}] {self.message}"


Finding = tuple[ast.AST, str, str]  # the node to blame, the rule name it is reported under, the message


@dataclass
class Context:
    """What the rules need to know about one file, worked out once before any rule runs."""

    policy: Policy
    aliases: dict[str, str]
    called: set[int]  # id() of every call's func node: `x.softmax(-1)` calls x.softmax, `self.softmax = None` does not
    forbidden_ops: set[str]  # the last part of each forbidden name
    bare_ops: set[str]  # the same without leading underscores: torch._foo and torch.foo are one op to the policy
    forbid_matmul_operator: bool
    allowed_imports: set[str]
    in_handler: bool = False  # set by the visitor before each node: does the node lie inside an except handler

    @classmethod
    def of(cls, nodes: list[tuple[ast.AST, bool]], policy: Policy) -> Context:
        forbidden_ops = {f.rsplit(".", 1)[-1] for f in policy.forbidden if f != "@"}
        return cls(policy=policy, aliases=_aliases(node for node, _ in nodes),
                   called={id(node.func) for node, _ in nodes if isinstance(node, ast.Call)},
                   forbidden_ops=forbidden_ops, bare_ops={op.lstrip("_") for op in forbidden_ops},
                   forbid_matmul_operator="@" in policy.forbidden or "matmul" in forbidden_ops,
                   allowed_imports=ALLOWED_IMPORTS | set(policy.extra_imports))

    def resolve(self, node: ast.AST) -> str | None:
        return _resolve(node, self.aliases)


Check = Callable[[Any, Context], Iterable[Finding]]  # handed only nodes of the types it registered for


@dataclass(frozen=True)
class Rule:
    names: tuple[str, ...]  # every rule name its findings may carry
    nodes: tuple[type[ast.AST], ...]  # the node types it is handed
    check: Check


# rule name -> the rule that reports it; registration order is the order in which violations on one line are listed
RULES: Registry[Rule] = Registry("static rule")


def rule(*names: str, nodes: tuple[type[ast.AST], ...]) -> Callable[[Check], Check]:
    """Register a check for the node types it reads. A check that decides between several rule names (a stream
    or a thread) registers them all, so its findings keep their traversal order with one another."""
    def register(check: Check) -> Check:
        taken = [name for name in names if name in RULES]
        if taken:
            raise ValueError(f"the rule name '{taken[0]}' is registered twice")
        entry = Rule(names, nodes, check)
        for name in names:
            RULES.add(name, entry)
        return check
    return register


def check_source(source: str, policy: Policy, filename: str = "solution.py") -> list[Violation]:
    """All policy violations in one Python source. A syntax error raises SyntaxError."""
    nodes = _walk(ast.parse(source, filename=filename))
    found: list[Violation] = []
    seen: set[tuple[int, str]] = set()
    for node, name, message in _findings(nodes, Context.of(nodes, policy)):
        key = (getattr(node, "lineno", 0), message)
        if key not in seen:
            seen.add(key)
            found.append(Violation(name, key[0], message))
    for text in _inline_strings(node for node, _ in nodes):
        for name, line, message in check_native(text, policy):
            found.append(Violation(name, 0, f"in a load_inline source, line {line}: {message}"))
    return sorted(found, key=lambda v: v.line)


def _walk(tree: ast.Module) -> list[tuple[ast.AST, bool]]:
    """The one traversal: every node in ast.walk's (breadth-first) order, each with whether it lies inside
    the except handler of a `try` (the handler's own node and its exception type included; the handlers
    of `try ... except*` are not counted)."""
    out: list[tuple[ast.AST, bool]] = []
    queue: deque[tuple[ast.AST, bool]] = deque([(tree, False)])
    while queue:
        node, in_handler = queue.popleft()
        out.append((node, in_handler))
        is_try = isinstance(node, ast.Try)
        queue.extend((child, in_handler or (is_try and isinstance(child, ast.ExceptHandler)))
                     for child in ast.iter_child_nodes(node))
    return out


def _findings(nodes: list[tuple[ast.AST, bool]], context: Context) -> list[Finding]:
    """Each node handed to the rules registered for its type. Findings come out rule by rule in registration
    order and, within a rule, in traversal order: de-duplication keeps the first of a kind, and the
    violations of one line are listed in this order."""
    rules = list({id(entry): entry for entry in RULES.values()}.values())
    by_type: dict[type[ast.AST], list[tuple[int, Rule]]] = {}
    found: list[tuple[int, int, Finding]] = []
    for node, in_handler in nodes:
        if type(node) not in by_type:
            by_type[type(node)] = [(rank, entry) for rank, entry in enumerate(rules) if isinstance(node, entry.nodes)]
        context.in_handler = in_handler
        for rank, entry in by_type[type(node)]:
            for finding in entry.check(node, context):
                if finding[1] not in entry.names:
                    raise ValueError(f"{entry.check.__name__} reported '{finding[1]}', a name it did not register")
                found.append((rank, len(found), finding))
    found.sort(key=lambda f: f[:2])
    return [finding for _, _, finding in found]


def check_language(sources: dict[Path, str], policy: Policy) -> list[tuple[Path, Violation]]:
    """A kernel-to-kernel task's solution stays in its starter's language: Triton kernels and no native
    build, or CUDA C++ (load_inline, .cu files through ctypes) and no Triton. Sources that do not parse
    are left to the syntax check."""
    if policy.language is None:
        return []
    other = "CUDA C++" if policy.language == "triton" else "Triton"
    own = "Triton (@triton.jit)" if policy.language == "triton" else "CUDA C++ (load_inline or .cu files)"
    found: list[tuple[Path, Violation]] = []
    has_kernel = False
    for path, text in sources.items():
        if path.suffix in NATIVE_SUFFIXES:
            if policy.language == "triton":
                found.append((path, Violation("language", 1, f"native source in a Triton task: the solution "
                                              f"stays in {own}")))
            else:
                has_kernel = True
            continue
        try:
            nodes = [node for node, _ in _walk(ast.parse(text))]
        except SyntaxError:
            continue
        aliases = _aliases(nodes)
        for node in nodes:
            names = [_resolve(d.func if isinstance(d, ast.Call) else d, aliases)
                     for d in getattr(node, "decorator_list", [])] if isinstance(node, ast.FunctionDef) else []
            if any(n in TRITON_KERNEL for n in names):
                has_kernel = has_kernel or policy.language == "triton"
            if isinstance(node, ast.Call) and _resolve(node.func, aliases) in CUDA_BUILDERS:
                if policy.language == "cuda":
                    has_kernel = True
                else:
                    found.append((path, Violation("language", node.lineno, f"builds {other} code: the solution "
                                                  f"stays in {own}")))
            if isinstance(node, (ast.Import, ast.ImportFrom)) and policy.language == "cuda":
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(m == "triton" or m.startswith("triton.") for m in modules):
                    found.append((path, Violation("language", node.lineno, f"imports Triton: the solution stays "
                                                  f"in {own}")))
    if not has_kernel:
        first = next(iter(sources), Path("solution.py"))
        found.append((first, Violation("language", 1, f"no {own} kernel: this task's solution stays in "
                                       f"{own} and computes with its own kernels")))
    return found


# The rules, in the order their violations on one line are listed.

@rule("forbidden-op", nodes=(ast.BinOp, ast.AugAssign, ast.Attribute, ast.Name))
def _forbidden_op(node: ast.AST, context: Context) -> Iterator[Finding]:
    if isinstance(node, (ast.BinOp, ast.AugAssign)):
        if isinstance(node.op, ast.MatMult) and context.forbid_matmul_operator:
            yield node, "forbidden-op", "the @ operator (matrix multiply) is forbidden by this problem"
        return
    dotted = context.resolve(node)
    if dotted is None:
        # a method on something not imported (x.softmax(...)): caught by name, whatever x is
        if isinstance(node, ast.Attribute) and node.attr.lstrip("_") in context.bare_ops and id(node) in context.called:
            yield node, "forbidden-op", (f"'.{node.attr}' is forbidden by this problem "
                                         f"(Tensor.{node.attr} or a library {node.attr})")
        return
    last = dotted.rsplit(".", 1)[-1]
    if dotted.startswith("torch") and last.lstrip("_") in context.bare_ops:
        yield node, "forbidden-op", f"'{dotted}' is forbidden by this problem"
    elif not dotted.startswith("torch") and dotted in context.policy.forbidden:
        yield node, "forbidden-op", f"'{dotted}' is forbidden by this problem"


@rule("torch-compute", nodes=(ast.Call,))
def _torch_compute(node: ast.Call, context: Context) -> Iterator[Finding]:
    if context.policy.allow_torch_ops:
        return
    dotted = context.resolve(node.func)
    if dotted and dotted.startswith("torch.") and not _allocation(dotted):
        yield node, "torch-compute", (f"'{dotted}' computes with torch; this problem "
                                      "allows only allocation and metadata calls of torch")


@rule("import", nodes=(ast.Import, ast.ImportFrom))
def _imports(node: ast.Import | ast.ImportFrom, context: Context) -> Iterator[Finding]:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
        [node.module] if node.module and node.level == 0 else []
    for name in names:
        if not any(name == a or name.startswith(a + ".") for a in context.allowed_imports):
            yield node, "import", (f"import of '{name}' is not allowed (allowed: torch, triton, numpy, "
                                   "ctypes, os and the standard helpers; a problem may add more)")


@rule("stream", "thread", nodes=(ast.Call,))
def _concurrency(node: ast.Call, context: Context) -> Iterator[Finding]:
    dotted = context.resolve(node.func) or ""
    if dotted in STREAM_CALLS:
        yield node, "stream", (f"'{dotted}': creating or switching CUDA streams is not allowed; "
                               "run on the caller's current stream")
    elif dotted.startswith(CONCURRENCY_ROOTS):
        yield node, "thread", f"'{dotted}': threads and processes are not allowed"


@rule("patch", nodes=(ast.Assign, ast.Delete, ast.AugAssign, ast.AnnAssign, ast.Call))
def _patching(node: ast.AST, context: Context) -> Iterator[Finding]:
    targets: list[ast.AST] = []
    if isinstance(node, (ast.Assign, ast.Delete)):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
            and node.args:
        targets = [node.args[0]]
    for target in targets:
        dotted = context.resolve(target) or ""
        if dotted.split(".")[0] in PROTECTED_ROOTS and (isinstance(target, ast.Attribute) or
                                                        isinstance(node, ast.Call)):
            yield node, "patch", (f"assigning to '{dotted}' is not allowed (no patching of torch, "
                                  "triton, time or the harness)")


@rule("tensor-subclass", nodes=(ast.ClassDef, ast.Attribute))
def _subclasses(node: ast.ClassDef | ast.Attribute, context: Context) -> Iterator[Finding]:
    if isinstance(node, ast.Attribute):
        if node.attr in ("_make_subclass", "as_subclass", "_make_wrapper_subclass"):
            yield node, "tensor-subclass", f"'.{node.attr}' makes a Tensor subclass"
        return
    for base in node.bases:
        if (context.resolve(base) or "") in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"):
            yield node, "tensor-subclass", f"class {node.name} subclasses torch.Tensor"
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name in ("__torch_function__", "__torch_dispatch__"):
            yield item, "tensor-subclass", f"{node.name}.{item.name} intercepts torch calls"


@rule("fallback", nodes=(ast.Call,))
def _fallbacks(node: ast.Call, context: Context) -> Iterator[Finding]:
    """A call inside an except handler that computes with torch: a silent fallback to the reference path."""
    if not context.in_handler:
        return
    dotted = context.resolve(node.func) or ""
    method = node.func.attr if isinstance(node.func, ast.Attribute) and not dotted else ""
    if (dotted.startswith("torch.") and not _allocation(dotted)) or method in context.forbidden_ops:
        yield node, "fallback", (f"'{dotted or '.' + method}' inside an except handler: "
                                 "falling back to torch when the kernel fails is not allowed")


@rule("dynamic-code", nodes=(ast.Call,))
def _dynamic_code(node: ast.Call, _context: Context) -> Iterator[Finding]:
    if not isinstance(node.func, ast.Name):
        return
    if node.func.id in DYNAMIC_CODE:
        yield node, "dynamic-code", f"'{node.func.id}()' runs code the policy cannot read"
    # vars() hands out a whole namespace; getattr() only with a name not written in the source
    elif node.func.id == "vars" or (node.func.id == "getattr" and _computed_name(node)):
        yield node, "dynamic-code", (f"'{node.func.id}()' with a computed name reaches an attribute the "
                                     "policy cannot read (a forbidden op spelled at run time)")


def _computed_name(call: ast.Call) -> bool:
    """getattr(obj, <not a string literal>) on anything but self."""
    if len(call.args) < 2 or (isinstance(call.args[0], ast.Name) and call.args[0].id == "self"):
        return False
    name = call.args[1]
    return not (isinstance(name, ast.Constant) and isinstance(name.value, str))


@rule("introspection", nodes=(ast.Attribute,))
def _introspection(node: ast.Attribute, _context: Context) -> Iterator[Finding]:
    if node.attr in INTROSPECTION:
        yield node, "introspection", (f"'.{node.attr}' reaches into the interpreter's frames or objects, "
                                      "where the harness keeps its state")


def check_file_names(files: list[Path], root: Path) -> list[tuple[Path, Violation]]:
    """Files whose names would shadow a module the harness or the solution imports."""
    out = []
    for path in files:
        stem = path.relative_to(root).parts[0].removesuffix(".py") if path.is_relative_to(root) else path.stem
        if path.suffix == ".py" and stem in SHADOWABLE:
            out.append((path, Violation("shadow", 1, f"a file named '{path.name}' would be imported in place of "
                                        f"the module '{stem}'")))
    return out


def _inline_strings(nodes: Iterable[ast.AST]) -> list[str]:
    """Every string constant long enough to be native source (load_inline's sources among them)."""
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and ("{" in n.value and ";" in n.value)]


def _allocation(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1] in ALLOCATION_CALLS or dotted.startswith(ALLOWED_TORCH_PREFIXES) \
        or dotted.startswith("torch.float") or dotted.startswith("torch.int") or dotted == "torch.bfloat16"


def _aliases(nodes: Iterable[ast.AST]) -> dict[str, str]:
    """Local name -> fully qualified module or object, from every import in the file."""
    out: dict[str, str] = {}
    for node in nodes:
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
