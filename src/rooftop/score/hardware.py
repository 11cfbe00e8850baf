"""Datasheet peaks of known GPUs (hardware.yaml, each entry with its sources).

The datasheet is the default denominator of the roofline score because it is the same on every
machine of a kind; a measured ceiling (calibration) can be reported beside it.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

import rooftop.problem.dtypes as dtypes
from rooftop.yamlfile import read_yaml

HARDWARE_FILE = Path(__file__).with_name("hardware.yaml")


class GpuSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    name: str
    match: list[str]
    exact: bool = False
    arch: str
    sms: int
    l2_mb: float
    memory_gb: float
    dram_gbps: float
    boost_clock_mhz: float | None = None
    peak_tflops: dict[str, float]
    sources: list[str]
    notes: str = ""

    @field_validator("peak_tflops", mode="before")
    @classmethod
    def _canonical(cls, value: dict) -> dict:
        return {k if k == "float4" else dtypes.canonical(k): v for k, v in value.items()}

    def matches(self, device_name: str) -> bool:
        name = device_name.strip().lower()
        if self.exact:
            return any(name == m.strip().lower() for m in self.match)
        return any(m.lower() in name for m in self.match)

    def peak_flops(self, dtype: str) -> float | None:
        """Dense peak in FLOP/s for a dtype (int8 in OP/s)."""
        tflops = self.peak_tflops.get(dtypes.canonical(dtype))
        return None if tflops is None else tflops * 1e12

    @property
    def dram_bytes_per_s(self) -> float:
        return self.dram_gbps * 1e9


@functools.cache
def datasheet() -> tuple[GpuSpec, ...]:
    raw = read_yaml(HARDWARE_FILE)
    return tuple(GpuSpec.model_validate(g) for g in raw["gpus"])


def lookup(device_name: str) -> GpuSpec | None:
    """The first datasheet entry whose match strings fit the device name (file order: specific first)."""
    return next((g for g in datasheet() if g.matches(device_name)), None)
