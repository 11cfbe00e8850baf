"""How far a speedup moves between processes, folded into its interval.

A speedup's interval from paired samples says how precisely this evaluation measured the ratio.
It does not say how much the ratio moves from one pair of processes to the next: a kernel whose
time depends on where its buffers landed, a library that picks another algorithm in another
process, or a call bound by its host's launch rate moves it by more than the pairs' sampling noise
(on an H200 KernelBench's level-1 transposed convolution 78, 2,161 launches a call, ran 9 to 18 ms
from one process to the next with the same kernels, while its paired intervals were a few percent
wide at most; 40_LayerNorm moved about 1 % either way). An interval that ignores that excludes 1.0 on a reference
judged against itself, and then means nothing.

The between-process part is measured per problem, shape and platform by judging the reference
as its own candidate in several fresh evaluations (`rooftop baselines --kinds self`): their
speedups should all be 1.0, and how far they are from it (their root-mean-square log, scaled by
Student's t for the runs' number) is the half-width every later verdict's interval is widened by,
in log space, added to the paired half-width in quadrature. Where no such record is stored, a GPU
verdict takes `DEFAULT_GPU_SPREAD`, or `HOST_BOUND_SPREAD` on a shape whose host outlasted the
spin (the events then timed each process's launch rate), and says so.
"""

from __future__ import annotations

import math
import statistics

# the between-process half-width a GPU verdict takes without a measured one: on an H200 the ten
# self-checked KernelBench references that the tracer had biased came out 0.9994-1.0003 once both
# sides carried it; four times their largest deviation, and half the 0.5 % a self-check may stray
DEFAULT_GPU_SPREAD = 0.0025
# ... and a shape flagged `host-bound` (its events timed its host's launches): KernelBench level 3's
# 28 host-bound self-checks on 4x H200 (2026-11-28, checks on) strayed from 1.0 by a root-mean-square
# log of 0.101 (median 0.5 %, but 1.57 and 0.82 among them); 1.96 times that. The 126 shapes that were
# not host-bound had 0.00105, which the GPU default covers
HOST_BOUND_SPREAD = 0.22
MIN_RUNS = 2  # self-checks needed before their spread replaces the default

# Student's t at 97.5 % for n - 1 degrees of freedom, n = 2..10; the normal quantile beyond
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def default_spread(flags: list[str]) -> tuple[float, str]:
    """A GPU shape's between-process half-width where none was measured for it, and its source."""
    if "host-bound" in flags:
        return HOST_BOUND_SPREAD, "host-bound default"
    return DEFAULT_GPU_SPREAD, "default"


def spread_of(speedups: list[float]) -> float | None:
    """The 95 % half-width, as a fraction, of a speedup between processes, from self-checks whose
    speedups should be 1.0: their root-mean-square distance from it in log space (a bias counts as
    much as a scatter), times t. None with fewer than `MIN_RUNS` usable runs."""
    logs = [math.log(s) for s in speedups if s > 0]
    if len(logs) < MIN_RUNS:
        return None
    rms = math.sqrt(statistics.fmean(x * x for x in logs))
    return math.expm1(_T975.get(len(logs) - 1, 1.96) * rms)


def widen(speedup: float, low: float | None, high: float | None,
          spread: float) -> tuple[float | None, float | None]:
    """The interval's ends with the between-process half-width added to each side's paired one in
    quadrature (in log space); ends that were never measured stay None."""
    if low is None or high is None or speedup <= 0 or low <= 0:
        return low, high
    center, between = math.log(speedup), math.log1p(spread)
    below = math.hypot(center - math.log(low), between)
    above = math.hypot(math.log(high) - center, between)
    return math.exp(center - below), math.exp(center + above)
