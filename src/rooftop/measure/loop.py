"""Measuring a trusted callable in this process: baselines, calibration, benchmarks.

The same method as an evaluation's timing gate, without a child: fresh inputs per call from a
pool, the same clock (L2 flush, one event pair per call), the same warm-up and stopping rule, the
same SM-clock rule, and CUDA graphs when asked. Only trusted code (a problem's reference, a
library) is measured this way; candidates are always measured through the child.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from rooftop.check.inputs import InputPool
from rooftop.measure.clocks import SmClock
from rooftop.measure.graphs import GraphedCall
from rooftop.measure.measurement import TimingStats
from rooftop.measure.stopping import Sampler, TimingPolicy
from rooftop.measure.timer import Clock, CpuClock, CudaEventClock


def clock_for(device: torch.device) -> Clock:
    return CudaEventClock(device) if device.type == "cuda" else CpuClock()


def measure(fn: Callable[..., Any], fresh_inputs: Callable[[], list[Any]], policy: TimingPolicy, clock: Clock,
            sm_clock: SmClock | None = None, graph: bool = False, memory_bytes: int | None = None) -> TimingStats:
    """Warm up, then time `fn(*inputs)` on fresh inputs until the policy stops."""
    sampler = Sampler(policy, max_clock_mhz=sm_clock.max_mhz if sm_clock else None)
    pool = InputPool(memory_bytes)
    graphed: GraphedCall | None = None
    wall = 0.0
    with torch.no_grad():
        while sampler.stopped_by is None:
            inputs = pool.admit(fresh_inputs())
            if graph:
                graphed = graphed or GraphedCall(fn, inputs)
                graphed.load(inputs)
                call = graphed.replay
            else:
                def call() -> None:
                    fn(*inputs)
            started = time.perf_counter()
            seconds = clock.time(call)
            elapsed = time.perf_counter() - started
            mhz = sm_clock.read() if sm_clock else None
            if sampler.warming:
                sampler.warmed()
            elif sampler.add(seconds, mhz):
                wall += elapsed
            time.sleep(sampler.pause_after(seconds, mhz))
    return sampler.stats(clock.name, wall)
