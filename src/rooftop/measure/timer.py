"""Timing one call at a time, with a swappable clock.

The clock is the seam: `CudaEventClock` (one event pair per call after an L2 flush) on a GPU,
`CpuClock` (perf_counter) on the CPU, and a fake clock in tests. When to stop is not the clock's
business: `stopping.Sampler` decides that on the trusted side.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any, Protocol


class Clock(Protocol):
    name: str

    def prepare(self) -> None:
        """Put the machine in the state every timed call starts from (caches cold)."""
        ...

    def time(self, call: Callable[[], Any]) -> float:
        """Seconds taken by one call."""
        ...


class CpuClock:
    name = "cpu_perf_counter"

    def prepare(self) -> None:
        pass

    def time(self, call: Callable[[], Any]) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start


class CudaEventClock:
    """One CUDA event pair around exactly one call, after reading 2x the L2 size to flush it and
    resetting persisting L2 lines (which a candidate could set aside for its data with an access
    policy window, and which no flush evicts).

    The flush reads rather than writes: a written flush leaves the L2 full of dirty lines, and the
    timed call then pays for writing them back to memory as its own data evicts them (measured on
    an H200: +15 % on a 45 us elementwise kernel against Nsight Compute). Read lines are clean.

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
        self._flush = torch.zeros(2 * l2, dtype=torch.int8, device=device)
        self._sink = torch.empty((), dtype=torch.int8, device=device)
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._cycles_per_second = self._spin_rate()
        self._hold_cycles = self.cycles_for(self.HOLD_SECONDS)
        self._reset_persisting = _persisting_l2_reset()

    def cycles_for(self, seconds: float) -> int:
        """GPU clock cycles that `_sleep` spins for `seconds` (the rate measured when the clock was made)."""
        return max(1, int(seconds * self._cycles_per_second))

    def _spin_rate(self) -> float:
        """GPU clock cycles `_sleep` spins per second, measured once (not assumed)."""
        torch, probe = self._torch, 1_000_000
        torch.cuda._sleep(probe)  # first call loads the kernel
        self._start.record()
        torch.cuda._sleep(probe)
        self._end.record()
        self._end.synchronize()
        return probe / max(self._start.elapsed_time(self._end) / 1e3, 1e-6)

    def prepare(self) -> None:
        if self._reset_persisting is not None:
            self._reset_persisting()
        self._torch.amax(self._flush, dim=0, out=self._sink)

    def time(self, call: Callable[[], Any]) -> float:
        self.prepare()
        self._torch.cuda._sleep(self._hold_cycles)
        self._start.record()
        call()
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3


def _persisting_l2_reset() -> Callable[[], Any] | None:
    """The driver's cuCtxResetPersistingL2Cache for the current context, or None without it."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


def clock_for(device: Any) -> Clock:
    """The clock for a device: CUDA events on a GPU, perf_counter on the CPU."""
    return CudaEventClock(device) if getattr(device, "type", device) == "cuda" else CpuClock()
