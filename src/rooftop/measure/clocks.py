"""The GPU's SM clock, read through NVML while timing (read only: clocks are never set here).

A sample taken while the GPU ran far below its maximum clock (power or thermal capping, a clock
still ramping up after idle) measures the machine, not the kernel. The trusted side reads the
clock just after each timed call and the stopping rule drops and redoes samples taken too low.
"""

from __future__ import annotations

from typing import Any


class SmClock:
    """NVML's view of one GPU: current and maximum SM clock in MHz."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml, self._handle = nvml, handle
        self.max_mhz = float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))

    @classmethod
    def open(cls, device: Any) -> tuple[SmClock | None, str]:
        """The clock of a torch CUDA device, or None and why NVML cannot read it."""
        try:
            import pynvml as nvml
        except ImportError:
            return None, "nvidia-ml-py is not installed"
        try:
            import torch

            nvml.nvmlInit()
            props = torch.cuda.get_device_properties(device)
            uuid = str(getattr(props, "uuid", "") or "")
            if uuid:
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            else:
                handle = nvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device() if device is None
                                                          else torch.device(device).index or 0)
            return cls(nvml, handle), ""
        except Exception as exc:  # NVMLError and its many subclasses, or a torch without uuid
            return None, f"NVML could not read the SM clock ({type(exc).__name__}: {exc})"

    def read(self) -> float | None:
        try:
            return float(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None

    def facts(self) -> dict[str, float]:
        """Maximum clocks (SM, memory) for a hardware profile."""
        out = {"sm_max_mhz": self.max_mhz}
        try:
            out["memory_max_mhz"] = float(self._nvml.nvmlDeviceGetMaxClockInfo(self._handle, self._nvml.NVML_CLOCK_MEM))
        except Exception:
            pass
        return out
