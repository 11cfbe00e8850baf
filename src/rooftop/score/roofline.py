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


# A measured time past these bounds is not a fast kernel but a broken measurement or a cheat
# (work done outside the timed region). Peak FLOP/s cannot be beaten; DRAM bandwidth can, a little,
# when outputs stay in L2 after the timed region ends, so its bound is loose.
COMPUTE_SLACK = 1.1
BANDWIDTH_SLACK = 3.0


def implausible(gpu: GpuSpec | None, dtype: str, flops: float | None, nbytes: float | None,
                seconds: float) -> str | None:
    """Why a time is faster than the hardware allows, or None when it is possible."""
    if gpu is None or seconds <= 0:
        return None
    peak = gpu.peak_flops(dtype)
    if flops and peak and flops / seconds > COMPUTE_SLACK * peak:
        return f"{flops / seconds / 1e12:.1f} TFLOP/s is above the device's {peak / 1e12:.1f} TFLOP/s {dtype} peak"
    if nbytes and nbytes / seconds > BANDWIDTH_SLACK * gpu.dram_bytes_per_s:
        return (f"{nbytes / seconds / 1e9:.0f} GB/s is over {BANDWIDTH_SLACK:g}x the device's "
                f"{gpu.dram_bytes_per_s / 1e9:.0f} GB/s memory bandwidth")
    return None
