"""Timing one call at a time, with a swappable clock.

The clock is the seam: `CudaEventClock` (one event pair per call after an L2 flush) on a GPU,
`CpuClock` (perf_counter) on the CPU, and a fake clock in tests. The stopping rule is a
parameter (`TimingPolicy`), not a loop buried in the clock. Adaptive stopping, clock sampling
and cross-checks attach here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel

from rooftop.measure.measurement import TimingStats


class TimingPolicy(BaseModel):
    warmup_calls: int = 3
    warmup_seconds: float = 0.05
    min_samples: int = 10
    max_samples: int = 200
    target_seconds: float = 0.5  # stop once this much time has been measured (after min_samples)
    max_wall_seconds: float = 10.0  # per measurement, warm-up included

    @classmethod
    def for_device(cls, device: str) -> "TimingPolicy":
        if device == "cpu":  # CPU runs are smoke runs, often under the Triton interpreter
            return cls(warmup_calls=1, warmup_seconds=0.0, min_samples=3, max_samples=20,
                       target_seconds=0.2, max_wall_seconds=10.0)
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
    """One CUDA event pair around exactly one call, after writing 2x the L2 size to flush it."""

    name = "cuda_event"

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)) or 64 << 20
        self._flush = torch.empty(2 * l2, dtype=torch.int8, device=device)
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def time(self, call: Callable[[], Any]) -> float:
        self._flush.zero_()
        self._start.record()
        call()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3


def measure(calls: list[Callable[[], Any]], clock: Clock, policy: TimingPolicy,
            wall: Callable[[], float] = time.monotonic) -> TimingStats:
    """Warm up, then time calls (cycling over `calls`, one per input set) until the policy stops."""
    began = wall()
    warm = 0
    while warm < policy.warmup_calls or (wall() - began) < policy.warmup_seconds:
        calls[warm % len(calls)]()
        warm += 1
        if wall() - began > policy.max_wall_seconds / 4:
            break
    samples: list[float] = []
    stopped_by = "max_samples"
    while len(samples) < policy.max_samples:
        samples.append(clock.time(calls[len(samples) % len(calls)]))
        if len(samples) >= policy.min_samples and sum(samples) >= policy.target_seconds:
            stopped_by = "target_seconds"
            break
        if wall() - began > policy.max_wall_seconds:
            stopped_by = "max_wall_seconds"
            break
    return TimingStats(clock=clock.name, samples=samples, warmup_calls=warm, stopped_by=stopped_by)
