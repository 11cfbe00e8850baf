"""When to stop measuring: warm-up, adaptive stopping and the clock rule, in the spirit of nvbench.

The trusted side consults a `Sampler` call by call. It decides before each call whether it is a
warm-up call, hands it each timed sample (with the SM clock read just after, when NVML can), and
stops when `stopped_by` names a reason. The measured process never learns which kind of call it
is running, nor how many are left.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable

from pydantic import BaseModel

from rooftop.measure.measurement import TimingStats, relative_standard_error


class TimingPolicy(BaseModel):
    """Sampling may stop once it has `min_samples` samples, the median's relative standard error is
    at most `target_rse` (None: no precision rule, stop at the minimums), and `min_seconds` of
    measured time, or `min_wall_seconds` of wall time since the first sample, have passed; it must
    stop at any cap, even short of `min_samples` (a slow call on a CPU can meet `max_wall_seconds`
    after one sample: such a measurement has a median but no interval, see
    `measurement.MIN_INTERVAL_SAMPLES`). The wall-time minimum is there because every timed call
    costs a round trip, fresh inputs, checks and the reference's call besides its own time: 0.5 s
    of measured time is 20,000 calls of a 25 us kernel, and 750 calls (4 s of wall time on an H200)
    of a 0.66 ms one, whose median met the precision rule long before. A sample whose SM clock was
    below `min_clock_fraction` of the maximum is dropped and taken again."""

    warmup_calls: int = 3
    warmup_seconds: float = 0.2
    min_samples: int = 10
    min_seconds: float = 0.5  # measured time (sum of samples)
    min_wall_seconds: float = 0.5  # or this much wall time since the first sample, whichever comes first
    target_rse: float | None = 0.005
    max_samples: int = 1000
    max_seconds: float = 30.0  # measured time
    max_wall_seconds: float = 120.0  # per measurement, warm-up included
    min_clock_fraction: float = 0.75
    many_dropped: float = 0.1  # share of low-clock samples that flags the measurement
    max_dropped: int = 50  # past this many, a GPU capped for good is measured as it is (and flagged)
    # a sample taken below this share of the maximum clock (a GPU at its power limit) is followed
    # by an idle pause of `cooldown` times its duration (at most max_cooldown_seconds), so
    # long compute-bound calls are timed as the GPU runs them, not as a heat-soaked loop does
    cool_below: float = 0.9
    cooldown: float = 2.0
    max_cooldown_seconds: float = 0.05

    @classmethod
    def for_device(cls, device: str) -> TimingPolicy:
        if device == "cpu":  # CPU runs are smoke runs, often under the Triton interpreter
            return cls(warmup_calls=1, warmup_seconds=0.0, min_samples=3, min_seconds=0.2, target_rse=None,
                       max_samples=20, max_seconds=10.0, max_wall_seconds=10.0)
        return cls()


class Sampler:
    """The stopping rule as a state: warm-up first, then samples until a reason to stop."""

    def __init__(self, policy: TimingPolicy, wall: Callable[[], float] = time.monotonic,
                 max_clock_mhz: float | None = None) -> None:
        self.policy, self._wall, self.max_clock_mhz = policy, wall, max_clock_mhz
        self._began = wall()
        self.warmup_calls = 0
        self.samples: list[float] = []
        self.clocks: list[float] = []
        self.dropped = 0
        self._ordered: list[float] = []
        self._measured = 0.0
        self._first_sample: float | None = None
        self.stopped_by: str | None = None

    @property
    def warming(self) -> bool:
        p, elapsed = self.policy, self._wall() - self._began
        if elapsed > p.max_wall_seconds / 4:
            return False
        return self.warmup_calls < p.warmup_calls or elapsed < p.warmup_seconds

    def warmed(self) -> None:
        self.warmup_calls += 1

    def low_clock(self, clock_mhz: float | None) -> bool:
        """Whether a sample taken at this SM clock is to be dropped and taken again."""
        return clock_mhz is not None and self.max_clock_mhz is not None and \
            self.dropped < self.policy.max_dropped and clock_mhz < self.policy.min_clock_fraction * self.max_clock_mhz

    def add(self, seconds: float, clock_mhz: float | None = None) -> bool:
        """Take one sample; False when it was dropped for a low clock (the caller takes another)."""
        if self.low_clock(clock_mhz):
            self.drop()
            return False
        self.samples.append(seconds)
        if clock_mhz is not None:
            self.clocks.append(clock_mhz)
        bisect.insort(self._ordered, seconds)
        self._measured += seconds
        now = self._wall()
        if self._first_sample is None:
            self._first_sample = now
        p, n = self.policy, len(self.samples)
        long_enough = self._measured >= p.min_seconds or now - self._first_sample >= p.min_wall_seconds
        if n >= p.min_samples and long_enough and \
                (p.target_rse is None or relative_standard_error(self._ordered) <= p.target_rse):
            self.stopped_by = "precision" if p.target_rse is not None else "min_samples"
        else:
            self._check_caps()
        return True

    @property
    def measured(self) -> float:
        """Seconds the kept samples add up to."""
        return self._measured

    @property
    def median(self) -> float:
        """The kept samples' median (the upper one of an even count), nan before the first."""
        return self._ordered[len(self._ordered) // 2] if self._ordered else float("nan")

    def drop(self) -> None:
        """A sample not kept (its clock, or its partner's in a paired measurement, was low)."""
        self.dropped += 1
        self._check_caps()

    def _check_caps(self) -> None:
        p = self.policy
        if len(self.samples) >= p.max_samples:
            self.stopped_by = "max_samples"
        elif self._measured >= p.max_seconds:
            self.stopped_by = "max_seconds"
        elif self._wall() - self._began > p.max_wall_seconds:
            self.stopped_by = "max_wall_seconds"

    def pause_after(self, seconds: float, clock_mhz: float | None) -> float:
        """Seconds to leave the GPU idle after a sample taken at this clock (0: none needed)."""
        p = self.policy
        if clock_mhz is None or self.max_clock_mhz is None or clock_mhz >= p.cool_below * self.max_clock_mhz:
            return 0.0
        return min(p.max_cooldown_seconds, p.cooldown * seconds)

    @property
    def many_dropped(self) -> bool:
        total = len(self.samples) + self.dropped
        return total > 0 and self.dropped / total > self.policy.many_dropped

    def stats(self, clock: str, wall_seconds: float | None = None) -> TimingStats:
        return TimingStats(clock=clock, samples=self.samples, warmup_calls=self.warmup_calls,
                           stopped_by=self.stopped_by or "", sm_clock_mhz=self.clocks,
                           max_clock_mhz=self.max_clock_mhz, low_clock_dropped=self.dropped,
                           wall_seconds=wall_seconds)
