"""The figures KernelBench's analysis reports for a run of generations, computed from rooftop's own
measurements: compile rate, correctness rate, fast_p, the geometric-mean speedup and pass@k.

Pure arithmetic over `SampleOutcome`s, so the figures are tested on hand-made numbers. Every rate
divides by all the samples, failures included (a generation that did not compile, or names a
problem that does not exist, counts in the denominator of fast_p as it does in KernelBench's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from rooftop.score.aggregate import geomean

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class SampleOutcome:
    """One generation's result: which problem it was for, and what its verdict said."""

    problem: Hashable  # samples of one problem share it: pass@k groups by it
    compiled: bool
    correct: bool
    speedup: float | None = None  # eager reference time / candidate time; None when not timed


def rate(samples: Sequence[SampleOutcome], which: str) -> float:
    """Share of all samples that `compiled` or are `correct`; 0.0 for no samples."""
    return sum(1 for s in samples if getattr(s, which)) / len(samples) if samples else 0.0


def fast_p(samples: Sequence[SampleOutcome], p: float) -> float:
    """Share of ALL samples that are correct and faster than eager by more than p.

    fast_0 is the correctness rate: a correct sample's speedup is positive even when it was not
    timed; for p > 0 a correct sample without a speedup does not count as faster.
    """
    if not samples:
        return 0.0
    faster = sum(1 for s in samples if s.correct and (s.speedup > p if s.speedup is not None else p <= 0))
    return faster / len(samples)


def geomean_speedup(samples: Sequence[SampleOutcome]) -> float | None:
    """Geometric mean of the speedups of the correct samples that have one; None when none do."""
    return geomean(s.speedup for s in samples if s.correct)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator 1 - C(n-c, k) / C(n, k): the chance that at least one of k samples
    drawn without replacement from n, of which c are correct, is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    missed = 1.0  # C(n-c, k) / C(n, k) as a product, which never forms the large binomials
    for i in range(n - c + 1, n + 1):
        missed *= 1.0 - k / i
    return 1.0 - missed


def pass_at_ks(samples: Sequence[SampleOutcome]) -> dict[int, float]:
    """pass@k averaged over problems, for k from 1 to the fewest samples any problem has; empty
    when every problem has a single sample (then pass@1 is the correctness rate)."""
    per_problem = Counter(s.problem for s in samples)
    if not per_problem or max(per_problem.values()) < 2:
        return {}
    correct = Counter(s.problem for s in samples if s.correct)
    most_k = min(per_problem.values())
    return {k: sum(pass_at_k(n, correct[p], k) for p, n in per_problem.items()) / len(per_problem)
            for k in range(1, most_k + 1)}


def fast_key(p: float) -> str:
    return f"fast_{p:g}"


def summarize(samples: Sequence[SampleOutcome]) -> dict[str, object]:
    """Every figure under the names KernelBench's analysis uses (fast_p keyed fast_0 ... fast_2)."""
    return {
        "n": len(samples),
        "compile_rate": rate(samples, "compiled"),
        "correctness_rate": rate(samples, "correct"),
        **{fast_key(p): fast_p(samples, p) for p in FAST_P},
        "geomean_speedup": geomean_speedup(samples),
        "pass_at_k": pass_at_ks(samples),
    }
