"""Timing one call at a time, with a swappable clock.

The clock is the seam: `CudaEventClock` (one event pair per call after an L2 flush) on a GPU,
`CpuClock` (perf_counter) on the CPU, and a fake clock in tests. The stopping rule is a
parameter (`TimingPolicy`) applied by a `Sampler` on the trusted side, not a loop buried in the
clock. Adaptive stopping, clock sampling and cross-checks attach here.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from rooftop.measure.measurement import TimingStats, relative_standard_error


class TimingPolicy(BaseModel):
    """When warm-up ends and sampling stops (in the spirit of nvbench's adaptive stopping).

    Sampling may stop once it has `min_samples` samples and `min_seconds` of measured time and
    the median's relative standard error is at most `target_rse` (None: no precision rule, stop
    at the minimums); it must stop at any cap.
    """

    warmup_calls: int = 3
    warmup_seconds: float = 0.2
    min_samples: int = 10
    min_seconds: float = 0.5  # measured time (sum of samples)
    target_rse: float | None = 0.005
    max_samples: int = 1000
    max_seconds: float = 30.0  # measured time
    max_wall_seconds: float = 120.0  # per measurement, warm-up included

    @classmethod
    def for_device(cls, device: str) -> "TimingPolicy":
        if device == "cpu":  # CPU runs are smoke runs, often under the Triton interpreter
            return cls(warmup_calls=1, warmup_seconds=0.0, min_samples=3, min_seconds=0.2, target_rse=None,
                       max_samples=20, max_seconds=10.0, max_wall_seconds=10.0)
        return cls()


class Clock(Protocol):
    name: str

    def time(self, call: Callable[[], Any]) -> float:
        """Seconds taken by one call."""
        ...


class CpuClock:
    name = "cpu_perf_counter"

    def time(self, call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start


class CudaEventClock:
    """One CUDA event pair around exactly one call, after writing 2x the L2 size to flush it.

    Between the flush and the start event the GPU spins for a while (`torch.cuda._sleep`), so the
    start event, the call's launches and the end event are all queued before the GPU reaches them:
    the events then bracket the call's GPU work, not the host's time to launch it (which, for a
    Python launcher after an idle gap, can exceed the flush).
    """

    name = "cuda_event"
    HOLD_SECONDS = 200e-6

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)) or 64 << 20
        self._flush = torch.empty(2 * l2, dtype=torch.int8, device=device)
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._hold_cycles = self._cycles_for(self.HOLD_SECONDS)

    def _cycles_for(self, seconds: float) -> int:
        """GPU clock cycles that `_sleep` needs to spin for `seconds` (measured, not assumed)."""
        torch, probe = self._torch, 1_000_000
        torch.cuda._sleep(probe)  # first call loads the kernel
        self._start.record()
        torch.cuda._sleep(probe)
        self._end.record()
        self._end.synchronize()
        per_second = probe / max(self._start.elapsed_time(self._end) / 1e3, 1e-6)
        return max(1, int(seconds * per_second))

    def time(self, call: Callable[[], Any]) -> float:
        self._flush.zero_()
        self._torch.cuda._sleep(self._hold_cycles)
        self._start.record()
        call()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3


class Sampler:
    """The stopping rule, as a state the trusted side consults call by call.

    The trusted side decides, before each call, whether it is a warm-up call (`warming`), adds
    the samples of timed calls, and stops when `stopped_by` names a reason. The child never
    learns which kind of call it is running."""

    def __init__(self, policy: TimingPolicy, wall: Callable[[], float] = time.monotonic) -> None:
        self.policy, self._wall = policy, wall
        self._began = wall()
        self.warmup_calls = 0
        self.samples: list[float] = []
        self._ordered: list[float] = []
        self._measured = 0.0
        self.stopped_by: str | None = None

    @property
    def warming(self) -> bool:
        p, elapsed = self.policy, self._wall() - self._began
        if elapsed > p.max_wall_seconds / 4:
            return False
        return self.warmup_calls < p.warmup_calls or elapsed < p.warmup_seconds

    def warmed(self) -> None:
        self.warmup_calls += 1

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)
        bisect.insort(self._ordered, seconds)
        self._measured += seconds
        p, n = self.policy, len(self.samples)
        if n >= p.min_samples and self._measured >= p.min_seconds and \
                (p.target_rse is None or relative_standard_error(self._ordered) <= p.target_rse):
            self.stopped_by = "precision" if p.target_rse is not None else "min_samples"
        elif n >= p.max_samples:
            self.stopped_by = "max_samples"
        elif self._measured >= p.max_seconds:
            self.stopped_by = "max_seconds"
        elif self._wall() - self._began > p.max_wall_seconds:
            self.stopped_by = "max_wall_seconds"

    def stats(self, clock: str) -> TimingStats:
        return TimingStats(clock=clock, samples=self.samples, warmup_calls=self.warmup_calls,
                           stopped_by=self.stopped_by or "")
