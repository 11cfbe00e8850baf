"""Where a checked call's outputs cross the process boundary: memory the trusted side owns.

Before a fully checked call the trusted side, which has just computed the expected outputs, makes
one shared allocation with a region of the expected size per output and sends its file descriptor
to the child over a Unix socket: device memory exported through CUDA's virtual memory management
on a GPU (check/vmm.py; legacy CUDA IPC does not cross the sandbox's namespaces), a memfd on the
CPU. The child copies each output whose size fits its region into it and reports every output's
dtype and shape. Nothing goes through a file, so neither a file-size limit nor a disk is involved,
and a 6 GiB output costs milliseconds.

The trusted side maps the allocation read-only, and nothing it relies on lives in memory the child
can write: the allocation is only a landing area, read once per call. On the CPU each output is
copied out; on a GPU the comparison reads the landing in place (a copy of a 6 GB output is 6 GB
the device may not have), chunk by chunk into float64 copies. A child writing the landing while
it is read can only change what it is judged on into other values it wrote itself: it still
never sees the expected outputs, and no timed call is checked this way. An output whose size does
not fit its region is never read: it stands as an empty tensor of the reported shape and dtype,
which the comparison rejects for its shape or dtype.
"""

from __future__ import annotations

import itertools
import mmap
import os
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel

DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
        torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)
} | {name: getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name)}
ALIGN = 512
_ids = itertools.count(1)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class Region(BaseModel):
    offset: int
    nbytes: int


class LandingSpec(BaseModel):
    """The shared allocation a full call writes its outputs into (a new id: a descriptor follows)."""

    id: int
    nbytes: int
    regions: list[Region]


class Landed(BaseModel):
    """One output as the child reports it: its dtype and shape, and whether its bytes were written."""

    dtype: str
    shape: list[int]
    written: bool


class LandingError(RuntimeError):
    """The shared memory could not be made, mapped or read: a failure of the harness."""


def _layout(sizes: list[int]) -> tuple[list[Region], int]:
    regions, offset = [], 0
    for size in sizes:
        regions.append(Region(offset=offset, nbytes=size))
        offset += -(-size // ALIGN) * ALIGN
    return regions, max(offset, ALIGN)


def _device_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


class Landing:
    """The trusted side's allocation for one shape's outputs (reused across that shape's seeds)."""

    def __init__(self, sizes: list[int], device: torch.device) -> None:
        self.sizes, self.device = list(sizes), device
        regions, total = _layout(self.sizes)
        self._mapping: Any = None
        self._fd: int | None = None
        try:
            if device.type == "cuda":
                from rooftop.check import vmm

                self._mapping = vmm.allocate(total, _device_index(device), vmm.PROT_READ)
                total = self._mapping.nbytes
            else:
                self._fd = os.memfd_create("rooftop-landing", os.MFD_CLOEXEC)
                os.ftruncate(self._fd, total)
                self._mapping = mmap.mmap(self._fd, total, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        except (OSError, RuntimeError) as exc:
            self.close()
            raise LandingError(f"the shared memory for {total} bytes of outputs could not be made: {exc}") from exc
        self.spec = LandingSpec(id=next(_ids), nbytes=total, regions=regions)

    def export(self) -> int:
        """A descriptor for the child (the caller sends it and closes it)."""
        if self.device.type == "cuda":
            return int(self._mapping.export())
        assert self._fd is not None
        return os.dup(self._fd)

    def fits(self, sizes: list[int]) -> bool:
        return sizes == self.sizes

    def read(self, landed: list[Landed]) -> list[torch.Tensor]:
        """The outputs the child reported (on the CPU copied out, on a GPU read-only views valid
        until the next call); a ValueError says what about the report does not add up."""
        out = []
        for i, entry in enumerate(landed):
            dtype = DTYPES.get(entry.dtype)
            if dtype is None:
                raise ValueError(f"output {i}: unknown dtype {entry.dtype!r}")
            if any(d < 0 for d in entry.shape):
                raise ValueError(f"output {i}: negative size in shape {entry.shape}")
            nbytes = int(np.prod(entry.shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
            if not entry.written:
                out.append(torch.empty(entry.shape, dtype=dtype, device="meta"))
                continue
            if i >= len(self.spec.regions) or self.spec.regions[i].nbytes != nbytes:
                raise ValueError(f"output {i}: a {entry.dtype} tensor of shape {entry.shape} ({nbytes} bytes) was "
                                 "reported written, but no region of that size was offered")
            out.append(self._copy(self.spec.regions[i], nbytes).view(dtype).reshape(entry.shape))
        return out

    def _copy(self, region: Region, nbytes: int) -> torch.Tensor:
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8, device=self.device)
        if self.device.type == "cuda":
            return self._mapping.bytes[region.offset:region.offset + nbytes]  # read in place (read-only)
        view = np.frombuffer(self._mapping, dtype=np.uint8, count=nbytes, offset=region.offset)
        return torch.from_numpy(view.copy())

    def close(self) -> None:
        if self._mapping is not None:
            self._mapping.close()
            self._mapping = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LandingTarget:
    """The child's mapping of one landing, writable."""

    def __init__(self, spec: LandingSpec, fd: int, device: torch.device) -> None:
        self.spec, self.device = spec, device
        self._bytes: torch.Tensor | None = None
        try:
            if device.type == "cuda":
                from rooftop.check import vmm

                self._mapping: Any = vmm.import_fd(fd, spec.nbytes, _device_index(device))
                self._bytes = self._mapping.bytes
            else:
                self._mapping = mmap.mmap(fd, spec.nbytes, flags=mmap.MAP_SHARED,
                                          prot=mmap.PROT_READ | mmap.PROT_WRITE)
                self._bytes = torch.frombuffer(self._mapping, dtype=torch.uint8)
        finally:
            os.close(fd)

    def write(self, values: list[torch.Tensor]) -> list[Landed]:
        """Each output's bytes into its region when its size is the region's; every output reported."""
        landed = []
        assert self._bytes is not None
        for i, value in enumerate(values):
            data = value.detach()
            nbytes = data.numel() * data.element_size()
            fits = i < len(self.spec.regions) and self.spec.regions[i].nbytes == nbytes
            if fits and nbytes:
                start = self.spec.regions[i].offset
                self._bytes[start:start + nbytes].copy_(data.contiguous().reshape(-1).view(torch.uint8))
            landed.append(Landed(dtype=dtype_name(data.dtype), shape=list(data.shape), written=fits))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return landed

    def close(self) -> None:
        self._bytes = None
        if self._mapping is not None:
            self._mapping.close()
            self._mapping = None
