"""Raw timing samples and the statistics computed from them.

A measurement never collapses to a bare float: the samples travel with it, and statistics are
derived on demand, so a later stage (or a reader of the store) can recompute anything.
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel, computed_field


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
