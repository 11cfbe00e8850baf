"""Achieved throughput and the fraction of the hardware roof it reaches."""

from __future__ import annotations

from rooftop.score.hardware import GpuSpec


def floor_seconds(gpu: GpuSpec, dtype: str, flops: float | None, nbytes: float | None) -> float | None:
    """The roofline time: max(flops / peak, bytes / bandwidth); no kernel can be faster."""
    times = []
    peak = gpu.peak_flops(dtype)
    if flops and peak:
        times.append(flops / peak)
    if nbytes:
        times.append(nbytes / gpu.dram_bytes_per_s)
    return max(times) if times else None


def roofline_fraction(gpu: GpuSpec | None, dtype: str, flops: float | None, nbytes: float | None,
                      seconds: float) -> float | None:
    """Roofline time over measured time: 1.0 means the kernel runs at the roof."""
    if gpu is None or seconds <= 0:
        return None
    floor = floor_seconds(gpu, dtype, flops, nbytes)
    return None if floor is None else floor / seconds
