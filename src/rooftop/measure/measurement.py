"""Raw timing samples and the statistics computed from them.

A measurement never collapses to a bare float: the samples travel with it, and statistics are
derived on demand, so a later stage (or a reader of the store) can recompute anything.
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache

from pydantic import BaseModel, computed_field

CONFIDENCE = 0.95


@lru_cache(maxsize=4096)
def median_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted samples that bracket the median with at least
    `confidence`, whatever the distribution: the count of samples below the true median is
    Binomial(n, 1/2), so x[lo]..x[hi] covers it unless that count falls in either tail.
    Below 6 samples no pair reaches 95 %; the range (min, max) is returned."""
    if n < 1:
        return 0, -1
    tail, cumulative, j = (1 - confidence) / 2, 0, 0
    # largest j with P(Binomial(n, 1/2) <= j - 1) <= tail; x[j-1] (0-based) is then the lower bound
    while j < n // 2:
        nxt = cumulative + math.comb(n, j)
        if nxt / 2**n > tail:
            break
        cumulative, j = nxt, j + 1
    j = max(j, 1)
    return j - 1, n - j


def median_interval(ordered: list[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of already sorted samples."""
    if not ordered:
        return float("nan"), float("nan")
    lo, hi = median_ranks(len(ordered), confidence)
    return ordered[lo], ordered[hi]


def relative_standard_error(ordered: list[float], confidence: float = CONFIDENCE) -> float:
    """The median's standard error relative to it, read off the interval's half-width
    (half-width / z); inf while the interval cannot be formed."""
    if len(ordered) < 6:
        return math.inf
    lo, hi = median_interval(ordered, confidence)
    median = statistics.median(ordered)
    if median <= 0:
        return math.inf
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return (hi - lo) / (2 * z) / median


class TimingStats(BaseModel):
    """Samples in seconds, plus which clock took them ('cuda_event' or 'cpu_perf_counter')."""

    clock: str
    samples: list[float]
    warmup_calls: int = 0
    stopped_by: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n(self) -> int:
        return len(self.samples)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def min(self) -> float:
        return min(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def max(self) -> float:
        return max(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def iqr(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q3 - q1

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ci_low(self) -> float:
        """Lower end of the median's 95 % distribution-free confidence interval."""
        return median_interval(sorted(self.samples))[0]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ci_high(self) -> float:
        return median_interval(sorted(self.samples))[1]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rse(self) -> float | None:
        """The median's relative standard error (None below 6 samples)."""
        value = relative_standard_error(sorted(self.samples))
        return None if math.isinf(value) else value
