"""Whose kernels ran: the solution's own, or the library's?

The child lists the GPU kernels of one traced call drawn in secret (name, duration, stream;
integrity/cupti.py); the trusted side names the kernels the solution defines (Triton `@jit`
functions, CUDA `__global__` functions) from its source, and computes the share of GPU time spent
in them. A problem can require a minimum share; every verdict reports it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

GLOBAL_FUNCTION = re.compile(r"__global__\s+(?:[\w:<>,\s\*&]+?\s+)?(\w+)\s*\(")


def solution_kernel_names(files: list[Path]) -> set[str]:
    """Names of the kernels a solution defines, read from its sources."""
    names: set[str] = set()
    for path in files:
        text = path.read_text(errors="replace")
        if path.suffix != ".py":
            names |= set(GLOBAL_FUNCTION.findall(text))
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                names.add(node.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__global__" in node.value:
                names |= set(GLOBAL_FUNCTION.findall(node.value))
    return names


def is_solution_kernel(kernel_name: str, names: set[str]) -> bool:
    """A kernel is the solution's when one of its defined names appears in the (possibly mangled) name."""
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z_])", kernel_name) or
               re.search(rf"\d{re.escape(n)}", kernel_name) for n in names)


def kernel_share(kernels: list[Any], names: set[str]) -> float | None:
    """Fraction of the profiled GPU kernel time spent in the solution's own kernels."""
    total = sum(k.microseconds for k in kernels)
    if total <= 0:
        return None
    return sum(k.microseconds for k in kernels if is_solution_kernel(k.name, names)) / total


def busy_seconds(kernels: list[Any]) -> float:
    """How long the GPU ran any of these kernels: the union of their intervals, so kernels that
    overlap on concurrent streams (cuDNN's FFT convolutions) count once, not once per stream."""
    busy, reach = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda k: k.start_us):
        start, end = k.start_us, k.start_us + k.microseconds
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy / 1e6
