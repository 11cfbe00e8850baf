"""Triton kernels: compiled by Triton at their first call, run by its interpreter without a GPU."""

from __future__ import annotations

from rooftop.build.backends import BACKENDS, Backend, SourceScan


class Triton(Backend):
    name, rank, family = "triton", 1, "triton"
    runtime_modules = ("triton",)
    kernel_markers = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})
    prompt_route = "- Triton: kernels decorated with `@triton.jit`, launched from `forward`."

    def recognise(self, scan: SourceScan) -> bool:
        return any(m == "triton" or m.startswith("triton.") for m in scan.imports)


BACKENDS.add(Triton.name, Triton())
