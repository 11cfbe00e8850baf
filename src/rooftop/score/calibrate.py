"""`rooftop calibrate`: the ceilings this GPU reaches, measured, beside its datasheet peaks.

Dense matrix multiply through the vendor library (cuBLAS via torch) at a large size per dtype,
device-memory bandwidth by a large copy (bytes read + written), and the facts read off the device
(SMs, L2, memory, maximum clocks). The datasheet stays the roofline's denominator (it is the same
on every machine of a kind); the measured profile is reported beside it, and a measured rate above
the datasheet means the table is wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import torch
from pydantic import BaseModel, Field

from rooftop.measure.clocks import SmClock
from rooftop.measure.loop import measure
from rooftop.measure.stopping import TimingPolicy
from rooftop.measure.timer import clock_for
from rooftop.score.hardware import lookup

MATMUL_SIZE = 8192
COPY_BYTES = 2 << 30
POLICY = TimingPolicy(warmup_calls=5, warmup_seconds=0.3, min_samples=20, min_seconds=0.3, target_rse=0.005,
                      max_samples=200, max_seconds=3.0, max_wall_seconds=20.0)


class Ceiling(BaseModel):
    """One measured rate: TFLOP/s (TOP/s for int8) or GB/s, with its datasheet figure."""

    measured: float | None = None
    datasheet: float | None = None
    median_seconds: float | None = None
    rse: float | None = None
    clock_median_mhz: float | None = None
    what: str = ""
    error: str = ""

    @property
    def fraction(self) -> float | None:
        return self.measured / self.datasheet if self.measured and self.datasheet else None


class HardwareProfile(BaseModel):
    device_name: str
    gpu_key: str | None = None  # datasheet entry
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    torch: str
    cuda: str | None = None
    driver: str | None = None
    capability: str
    sms: int
    l2_bytes: int
    memory_bytes: int
    sm_max_mhz: float | None = None
    memory_max_mhz: float | None = None
    matmul_tflops: dict[str, Ceiling] = {}  # by dtype
    copy_gbps: Ceiling = Ceiling()


def _matmul(dtype: str, n: int, device: torch.device) -> tuple[Callable[..., Any], list[Any]]:
    """The library call and its operands for one dtype (fp8 through scaled mm, int8 through int mm)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    if dtype in ("float32", "tfloat32"):
        return torch.matmul, [a, b]
    if dtype in ("bfloat16", "float16"):
        t = getattr(torch, dtype)
        return torch.matmul, [a.to(t), b.to(t)]
    if dtype == "float8_e4m3fn":
        one = torch.ones((), device=device)
        fa, fb = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()  # B column-major

        def scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return scaled, [fa, fb]
    if dtype == "int8":
        ia = torch.randint(-64, 64, (n, n), device=device, dtype=torch.int8)
        # column-major: the IMMA path
        ib = torch.randint(-64, 64, (n, n), device=device, dtype=torch.int8).t().contiguous().t()
        return torch._int_mm, [ia, ib]
    raise ValueError(dtype)


def _same(operands: list[Any]) -> Callable[[], list[Any]]:
    """Inputs for every timed call: the same operands (a library matmul keeps nothing between calls)."""
    return lambda: operands


def calibrate(device: str = "cuda", dtypes: tuple[str, ...] = ("float32", "tfloat32", "bfloat16", "float16",
                                                                  "float8_e4m3fn", "int8"),
              progress: Callable[[str], None] | None = None) -> HardwareProfile:
    from rooftop.environment import driver_version

    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)
    name = torch.cuda.get_device_name(dev)
    gpu = lookup(name)
    sm_clock, _ = SmClock.open(dev)
    facts = sm_clock.facts() if sm_clock else {}
    profile = HardwareProfile(device_name=name, gpu_key=gpu.key if gpu else None, torch=torch.__version__,
                              cuda=torch.version.cuda, driver=driver_version(),
                              capability=f"{props.major}.{props.minor}", sms=props.multi_processor_count,
                              l2_bytes=int(getattr(props, "L2_cache_size", 0)), memory_bytes=props.total_memory,
                              sm_max_mhz=facts.get("sm_max_mhz"), memory_max_mhz=facts.get("memory_max_mhz"))
    clock = clock_for(dev)
    fp8 = (props.major, props.minor) >= (8, 9)
    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for dtype in dtypes:
            if progress:
                progress(f"matmul {dtype}")
            ceiling = Ceiling(datasheet=(gpu.peak_flops(dtype) or 0) / 1e12 if gpu else None,
                              what=f"{MATMUL_SIZE}^3 through torch ({'cuBLASLt' if dtype != 'int8' else 'cuBLAS'})")
            if dtype == "float8_e4m3fn" and not fp8:
                ceiling.error = "no fp8 tensor cores before compute capability 8.9"
            else:
                try:
                    torch.backends.cuda.matmul.allow_tf32 = dtype == "tfloat32"
                    fn, operands = _matmul(dtype, MATMUL_SIZE, dev)
                    stats = measure(fn, _same(operands), POLICY, clock, sm_clock)
                    ceiling.median_seconds, ceiling.rse = stats.median, stats.rse
                    ceiling.clock_median_mhz = stats.clock_median_mhz
                    ceiling.measured = 2 * MATMUL_SIZE**3 / stats.median / 1e12
                except Exception as exc:  # a dtype this torch or GPU cannot multiply
                    ceiling.error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                finally:
                    torch.cuda.empty_cache()
            profile.matmul_tflops[dtype] = ceiling
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    if progress:
        progress("copy bandwidth")
    buffers = [torch.empty(COPY_BYTES, dtype=torch.uint8, device=dev).fill_(1),
               torch.empty(COPY_BYTES, dtype=torch.uint8, device=dev)]
    stats = measure(lambda a, b: b.copy_(a), lambda: buffers, POLICY, clock, sm_clock)
    profile.copy_gbps = Ceiling(measured=2 * COPY_BYTES / stats.median / 1e9, median_seconds=stats.median,
                                rse=stats.rse, clock_median_mhz=stats.clock_median_mhz,
                                datasheet=gpu.dram_gbps if gpu else None,
                                what=f"copy of {COPY_BYTES >> 30} GiB (bytes read + written)")
    buffers.clear()
    torch.cuda.empty_cache()
    return profile
