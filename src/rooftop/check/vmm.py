"""Device memory that another process can map: CUDA virtual memory management through the driver.

An allocation made with `cuMemCreate` is exported as a POSIX file descriptor, which crosses the
process boundary over a Unix socket (SCM_RIGHTS) like any other descriptor. Unlike the legacy CUDA
IPC handles it needs no shared PID or IPC namespace, so it reaches a child inside bubblewrap.
The driver is called through ctypes: no extra package, and only what this module needs.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import torch

ALLOCATION_PINNED = 1
HANDLE_POSIX_FD = 1
LOCATION_DEVICE = 1
PROT_READ, PROT_READWRITE = 1, 3


class VmmError(RuntimeError):
    """A driver call failed; the message names the call and the driver's error."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


@functools.cache
def _driver() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise VmmError(f"the CUDA driver library could not be loaded: {exc}") from None


def _call(name: str, *args: Any) -> None:
    driver = _driver()
    code = getattr(driver, name)(*args)
    if code != 0:
        text = ctypes.c_char_p()
        driver.cuGetErrorString(code, ctypes.byref(text))
        raise VmmError(f"{name} failed: {text.value.decode() if text.value else code} ({code})")


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type, prop.requestedHandleTypes = ALLOCATION_PINNED, HANDLE_POSIX_FD
    prop.location = _Location(LOCATION_DEVICE, device)
    return prop


def granularity(device: int) -> int:
    size = ctypes.c_size_t()
    _call("cuMemGetAllocationGranularity", ctypes.byref(size), ctypes.byref(_prop(device)), 0)
    return size.value


class _Pointer:
    """A device address range in the form torch.as_tensor reads (the CUDA array interface)."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None, "stream": None}


class Mapping:
    """One shareable allocation mapped into this process; `bytes` is a uint8 tensor over it."""

    def __init__(self, handle: int, nbytes: int, device: int, access: int) -> None:
        self.handle: int | None = handle
        self.nbytes, self.device = nbytes, device
        address = ctypes.c_uint64()
        _call("cuMemAddressReserve", ctypes.byref(address), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
              ctypes.c_uint64(0), ctypes.c_ulonglong(0))
        self.address = address.value
        try:
            _call("cuMemMap", ctypes.c_uint64(self.address), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                  ctypes.c_ulonglong(handle), ctypes.c_ulonglong(0))
            desc = _AccessDesc(_Location(LOCATION_DEVICE, device), access)
            _call("cuMemSetAccess", ctypes.c_uint64(self.address), ctypes.c_size_t(nbytes), ctypes.byref(desc),
                  ctypes.c_size_t(1))
        except VmmError:
            self.close()
            raise
        where = torch.device("cuda", device)
        self.bytes: torch.Tensor | None = torch.as_tensor(_Pointer(self.address, nbytes), device=where)

    def export(self) -> int:
        """A new file descriptor for the allocation (the caller sends it, then closes it)."""
        fd = ctypes.c_int()
        assert self.handle is not None
        _call("cuMemExportToShareableHandle", ctypes.byref(fd), ctypes.c_ulonglong(self.handle), HANDLE_POSIX_FD,
              ctypes.c_ulonglong(0))
        return fd.value

    def close(self) -> None:
        """Unmap and drop this process's handle; the memory goes when every process has dropped it."""
        if self.handle is None:
            return
        torch.cuda.synchronize(self.device)
        self.bytes = None
        driver = _driver()
        driver.cuMemUnmap(ctypes.c_uint64(self.address), ctypes.c_size_t(self.nbytes))
        driver.cuMemAddressFree(ctypes.c_uint64(self.address), ctypes.c_size_t(self.nbytes))
        driver.cuMemRelease(ctypes.c_ulonglong(self.handle))
        self.handle = None


def allocate(nbytes: int, device: int, access: int = PROT_READWRITE) -> Mapping:
    """A new shareable allocation of at least `nbytes` (rounded up to the driver's granularity)."""
    torch.cuda.synchronize(device)  # the primary context exists and is current
    step = granularity(device)
    size = max(step, -(-nbytes // step) * step)
    handle = ctypes.c_ulonglong()
    _call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(_prop(device)),
          ctypes.c_ulonglong(0))
    try:
        return Mapping(handle.value, size, device, access)
    except VmmError:
        _driver().cuMemRelease(handle)
        raise


def import_fd(fd: int, nbytes: int, device: int, access: int = PROT_READWRITE) -> Mapping:
    """Map an allocation another process exported as `fd` (the descriptor may be closed after)."""
    torch.cuda.synchronize(device)
    handle = ctypes.c_ulonglong()
    _call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), HANDLE_POSIX_FD)
    try:
        return Mapping(handle.value, nbytes, device, access)
    except VmmError:
        _driver().cuMemRelease(handle)
        raise
