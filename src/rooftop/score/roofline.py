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


# The roofline floor: a measured time below this share of the roofline time is not a fast kernel
# but a broken measurement or a cheat (work done outside the timed region). It is rejected, not
# clamped.
FLOOR_SHARE = 0.9


def implausible(gpu: GpuSpec | None, dtype: str, flops: float | None, nbytes: float | None,
                seconds: float) -> str | None:
    """Why a time is faster than the hardware allows, or None when it is possible.

    Before every timed call the L2 is flushed, so every byte read comes from device memory; but up
    to an L2's worth of written bytes may still sit in L2 when the end event fires. The bandwidth
    floor therefore counts `bytes - L2 size` (nothing for a problem that fits in L2); the compute
    floor counts every FLOP against the datasheet's dense peak.
    """
    if gpu is None or seconds <= 0:
        return None
    peak = gpu.peak_flops(dtype)
    if flops and peak and seconds < FLOOR_SHARE * flops / peak:
        return (f"{seconds * 1e6:.3g} us is below {FLOOR_SHARE:g} x the compute floor of {flops / peak * 1e6:.3g} us "
                f"({flops / seconds / 1e12:.1f} TFLOP/s against the device's {peak / 1e12:.1f} TFLOP/s {dtype} peak)")
    dram = (nbytes or 0) - gpu.l2_mb * 2**20  # MiB, the larger reading: the looser floor
    if dram > 0 and seconds < FLOOR_SHARE * dram / gpu.dram_bytes_per_s:
        floor = dram / gpu.dram_bytes_per_s
        return (f"{seconds * 1e6:.3g} us is below {FLOOR_SHARE:g} x the memory floor of {floor * 1e6:.3g} us "
                f"({dram / seconds / 1e9:.0f} GB/s through device memory, counting only the bytes beyond the "
                f"{gpu.l2_mb:g} MB L2, against the device's {gpu.dram_bytes_per_s / 1e9:.0f} GB/s)")
    return None
