"""The static gate: rules checked on the solution's AST before any of it runs.

Names are resolved through the file's imports, so `import torch.nn.functional as F; F.softmax`
and `from torch import matmul as mm` are seen for what they are. Runtime audits (dispatch counts,
streams, threads) live beside this module and catch what a static reading cannot.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

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
            if isinstance(node, ast.Attribute) and node.attr in forbidden_ops and id(node) in called:
                report("forbidden-op", node, f"'.{node.attr}' is forbidden by this problem "
                       f"(Tensor.{node.attr} or a library {node.attr})")
            continue
        last = dotted.rsplit(".", 1)[-1]
        if dotted.startswith("torch") and last.lstrip("_") in forbidden_ops:
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
    return sorted(found, key=lambda v: v.line)


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
