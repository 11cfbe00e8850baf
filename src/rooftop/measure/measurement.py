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


def min_interval_samples(confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose widest interval, (min, max), brackets the median with `confidence`:
    it misses only when every sample falls on one side, which has probability 2 / 2**n."""
    return max(1, math.ceil(1 + math.log2(1 / (1 - confidence)) - 1e-9))


# below this many samples (6 at 95 %) there is no interval: their range covers the median less
# often than it claims (5 samples: 94 %; 1 sample: never), and a single sample's is zero wide
MIN_INTERVAL_SAMPLES = min_interval_samples()


# below n/2 - TAIL_SKIP * sqrt(n), Binomial(n, 1/2) holds less than exp(-2 * TAIL_SKIP**2) = 3e-56 of
# its mass (Hoeffding): summing from there gives the same ranks as summing from 0
TAIL_SKIP = 8.0
Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)


@lru_cache(maxsize=4096)
def median_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted samples that bracket the median with at least
    `confidence`, whatever the distribution: the count of samples below the true median is
    Binomial(n, 1/2), so x[lo]..x[hi] covers it unless that count falls in either tail.
    Below `min_interval_samples` (6 at 95 %) no pair reaches it; the range (min, max) is returned,
    which `median_interval` does not take for an interval. The binomial terms are
    summed in floating point from their logarithms, over the few dozen that carry any mass: the
    sampler asks for every n as it grows, and exact big-integer sums cost seconds at n ~ 1000."""
    if n < 1:
        return 0, -1
    tail, cumulative = (1 - confidence) / 2, 0.0
    j = max(0, int(n / 2 - TAIL_SKIP * math.sqrt(n)))
    log_total = math.lgamma(n + 1) - n * math.log(2)
    # largest j with P(Binomial(n, 1/2) <= j - 1) <= tail; x[j-1] (0-based) is then the lower bound
    while j < n // 2:
        term = math.exp(log_total - math.lgamma(j + 1) - math.lgamma(n - j + 1))
        if cumulative + term > tail:
            break
        cumulative, j = cumulative + term, j + 1
    j = max(j, 1)
    return j - 1, n - j


def median_interval(ordered: list[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Distribution-free confidence interval of the median of already sorted samples; None when
    there are too few of them for any (`interval_note` says why)."""
    if len(ordered) < min_interval_samples(confidence):
        return None
    lo, hi = median_ranks(len(ordered), confidence)
    return ordered[lo], ordered[hi]


def interval_note(n: int, stopped_by: str = "") -> str | None:
    """Why `n` samples have no 95 % interval, in one line; None when they have one."""
    if n >= MIN_INTERVAL_SAMPLES:
        return None
    why = f" (sampling stopped by {stopped_by})" if stopped_by else ""
    return f"no 95 % interval: {n} sample{'' if n == 1 else 's'}, at least {MIN_INTERVAL_SAMPLES} needed{why}"


def relative_standard_error(ordered: list[float], confidence: float = CONFIDENCE) -> float:
    """The median's standard error relative to it, read off the interval's half-width
    (half-width / z); inf while the interval cannot be formed."""
    interval = median_interval(ordered, confidence)
    if interval is None:
        return math.inf
    lo, hi = interval
    n = len(ordered)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    if median <= 0:
        return math.inf
    z = Z if confidence == CONFIDENCE else statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return (hi - lo) / (2 * z) / median


def ratio_interval(numerators: list[float], denominators: list[float],
                   confidence: float = CONFIDENCE) -> tuple[float, float | None, float | None] | None:
    """Median of the paired ratios a_i / b_i and its distribution-free interval: a speedup taken
    call by call on the same inputs, so drift of the machine between calls cancels out. The
    interval's ends are None when the pairs are too few for one (a wall-time cap can stop a slow
    shape after one pair)."""
    ratios = sorted(a / b for a, b in zip(numerators, denominators) if a > 0 and b > 0)
    if not ratios:
        return None
    lo, hi = median_interval(ratios, confidence) or (None, None)
    return statistics.median(ratios), lo, hi


class TimingStats(BaseModel):
    """Samples in seconds, plus which clock took them ('cuda_event' or 'cpu_perf_counter').

    `sm_clock_mhz` holds the SM clock read (NVML) after each kept sample when it could be read;
    samples taken below the policy's share of the maximum clock are not kept but counted in
    `low_clock_dropped`. `wall_seconds` is the host's wall time around the timed calls, which
    must cover the sum of the samples."""

    clock: str
    samples: list[float]
    warmup_calls: int = 0
    stopped_by: str = ""
    sm_clock_mhz: list[float] = []
    max_clock_mhz: float | None = None
    low_clock_dropped: int = 0
    wall_seconds: float | None = None

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def n(self) -> int:
        return len(self.samples)

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def min(self) -> float:
        return min(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def max(self) -> float:
        return max(self.samples) if self.samples else float("nan")

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def iqr(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q3 - q1

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def ci_low(self) -> float | None:
        """Lower end of the median's 95 % distribution-free confidence interval (None below
        MIN_INTERVAL_SAMPLES samples: `ci_note` says why)."""
        interval = median_interval(sorted(self.samples))
        return interval[0] if interval else None

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def ci_high(self) -> float | None:
        interval = median_interval(sorted(self.samples))
        return interval[1] if interval else None

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def ci_note(self) -> str | None:
        """Why there is no interval (too few samples, and what stopped sampling); None when there is one."""
        return interval_note(self.n, self.stopped_by)

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def clock_min_mhz(self) -> float | None:
        return min(self.sm_clock_mhz) if self.sm_clock_mhz else None

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def clock_median_mhz(self) -> float | None:
        return statistics.median(self.sm_clock_mhz) if self.sm_clock_mhz else None

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def rse(self) -> float | None:
        """The median's relative standard error (None below 6 samples)."""
        value = relative_standard_error(sorted(self.samples))
        return None if math.isinf(value) else value
