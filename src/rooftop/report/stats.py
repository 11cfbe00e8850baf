"""The interval a leaderboard cell shows: the mean over repeats and its Student-t 95 % interval.

With three to five repeats per cell a bootstrap interval is little more than the range of the
values and claims more certainty than it has; the t interval widens honestly when n is small.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from pydantic import BaseModel

METHOD = ("mean over repeats with a two-sided Student-t 95% interval (n - 1 degrees of freedom), clipped to [0, 1] "
          "(a roofline fraction cannot leave it); none below 2 repeats")

# two-sided 95 % quantiles of Student's t for 1..30 degrees of freedom
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """The quantile; past 30 degrees of freedom the first Cornish-Fisher term of the normal's is
    within 0.001 of the exact value."""
    if df < 1:
        raise ValueError(df)
    if df <= len(_T95):
        return _T95[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df)


class Interval(BaseModel):
    """A mean over repeats: `low`..`high` is its 95 % interval (None below two values)."""

    n: int = 0
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    min: float | None = None
    max: float | None = None


def mean_interval(values: Iterable[float | None]) -> Interval:
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return Interval()
    mean = statistics.fmean(xs)
    low = high = None
    if len(xs) >= 2:
        half = t95(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
        low, high = max(0.0, mean - half), min(max(1.0, max(xs)), mean + half)
    return Interval(n=len(xs), mean=mean, low=low, high=high, min=min(xs), max=max(xs))
