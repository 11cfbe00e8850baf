"""A smoke shape for a single-file problem, derived from its size constants.

A KernelBench file has one fixed shape, its module constants, often gigabytes (19_ReLU: 6.4 GB of
input): nothing a CPU can check. The derived shape halves every integer constant from `SIZE_FROM`
up (sizes; smaller ones are kernel sizes, strides and dims, left alone) as many times as it takes
the counted bytes (inputs, outputs, weights: problem/figures.py) under `SMOKE_BYTES`, never below
`SMALLEST`, and is kept only when the reference then runs on the CPU. Halving keeps the sizes'
ratios and most of their divisibility. The shape says it was derived, and carries its own counts
(the problem's are the full size's).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from rooftop.problem.figures import CountFailed, budget, estimate, offline
from rooftop.problem.spec import ParamValue, Shape, Split

SIZE_FROM = 32
SMALLEST = 8
SMOKE_BYTES = 1 << 20
MAX_HALVINGS = 24
CPU_BUDGET_S = 20.0  # the reference's run on the CPU at the derived size


def derive_smoke(reference: Path, params: dict[str, ParamValue]) -> tuple[Shape | None, str]:
    """The smoke shape, or (None, why there is none)."""
    sizes = {k: v for k, v in params.items() if type(v) is int and v >= SIZE_FROM}
    for halvings in range(MAX_HALVINGS + 1 if sizes else 1):
        scaled = {**params, **{k: max(SMALLEST, v >> halvings) for k, v in sizes.items()}}
        try:
            figures = estimate(reference, scaled)
        except CountFailed as exc:
            return None, f"its reference could not be counted at a smaller size ({exc})"
        if figures.bytes > SMOKE_BYTES:
            if all(v == SMALLEST for k, v in scaled.items() if k in sizes):
                break
            continue
        failed = run_on_cpu(reference, scaled)
        if failed:
            return None, f"at 1/{1 << halvings} of its sizes the reference failed on a CPU ({failed})"
        how = f"its size constants ({', '.join(sizes)}) halved {halvings} time(s)" if halvings else \
            "its own constants, small enough already"
        return Shape(name="smoke", params=scaled, split=Split.smoke, flops=str(figures.flops) if figures.flops
                     else None, bytes=str(figures.bytes),
                     note=f"derived by rooftop for a CPU check: {how}; not a size of the original file"), ""
    return None, (f"halving its size constants ({', '.join(sizes)}) did not bring its inputs under "
                  f"{SMOKE_BYTES >> 20} MiB" if sizes else "it has no size constants to scale down")


def run_on_cpu(reference: Path, params: dict[str, ParamValue]) -> str:
    """'' when the reference builds and runs on the CPU with these constants, else why not."""
    import torch

    from rooftop.problem.instance import import_file, set_constants

    try:
        with budget(CPU_BUDGET_S, "running on the CPU"), offline(), warnings.catch_warnings(), \
                torch.random.fork_rng(devices=[]), torch.device("cpu"), torch.no_grad():
            warnings.simplefilter("ignore")
            module = import_file(reference)
            set_constants(vars(module), params)
            model = module.Model(*module.get_init_inputs())
            model(*module.get_inputs())
    except Exception as exc:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        return text if len(text) <= 200 else text[:197] + "..."
    return ""
