"""A minimal CUPTI activity client: which kernels ran, for how long, on which stream.

torch.profiler starts Kineto, which enables runtime and driver API tracing as well as kernel
records; its first use in a process costs seconds (2.6 s on an H200), more than the rest of an
evaluation's checks together, and it leaves API callbacks behind. The profiled call needs only
kernel records, so this client enables the one activity kind (concurrent kernels) through the
CUPTI library that ships with the CUDA wheels; it starts in milliseconds, and detaches CUPTI
again after each trace so that later calls launch as fast as before it.

The records are read by their documented layout (CUpti_ActivityKernel, unchanged in its leading
fields since CUDA 9); `trace()` checks the marker kernels it launched itself before trusting a
record, and reports the profiler as unavailable when they do not read back as expected.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

CONCURRENT_KERNEL = 10  # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
FLUSH_FORCED = 1  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
BUFFER_BYTES = 4 << 20
# offsets into CUpti_ActivityKernel (versions 4 and later): start, end (ns), streamId, name
START, END, STREAM, NAME = 16, 24, 48, 104


class ProfilerUnavailable(Exception):
    """No usable CUPTI in this process: the library is missing or its records did not check out."""


@dataclass
class KernelRecord:
    name: str
    start_ns: int
    end_ns: int
    stream: int


_REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                              ctypes.POINTER(ctypes.c_size_t))
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.c_size_t)


class _Client:
    """One attachment of CUPTI to the process: it accepts a single pair of buffer callbacks."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.lib = library
        self.records: list[KernelRecord] = []
        self._buffers: dict[int, Any] = {}
        self._requested, self._completed = _REQUESTED(self._on_requested), _COMPLETED(self._on_completed)
        rc = self.lib.cuptiActivityRegisterCallbacks(self._requested, self._completed)
        if rc != 0:
            raise ProfilerUnavailable(f"cuptiActivityRegisterCallbacks returned {rc}")

    def _on_requested(self, buffer: Any, size: Any, max_records: Any) -> None:
        block = (ctypes.c_uint64 * (BUFFER_BYTES // 8))()  # 8-byte aligned, as CUPTI requires
        address = ctypes.addressof(block)
        self._buffers[address] = block
        buffer[0], size[0], max_records[0] = address, BUFFER_BYTES, 0

    def _on_completed(self, _context: Any, _stream: int, buffer: int, _size: int, valid: int) -> None:
        record = ctypes.c_void_p()
        while self.lib.cuptiActivityGetNextRecord(ctypes.c_void_p(buffer), ctypes.c_size_t(valid),
                                                  ctypes.byref(record)) == 0:
            at = record.value or 0
            if ctypes.c_uint32.from_address(at).value != CONCURRENT_KERNEL:
                continue
            name = ctypes.c_char_p.from_address(at + NAME).value or b""
            self.records.append(KernelRecord(name.decode(errors="replace"),
                                             ctypes.c_uint64.from_address(at + START).value,
                                             ctypes.c_uint64.from_address(at + END).value,
                                             ctypes.c_uint32.from_address(at + STREAM).value))
        self._buffers.pop(buffer, None)

    def collect(self, call: Callable[[], Any]) -> tuple[Any, list[KernelRecord]]:
        self.records = []
        rc = self.lib.cuptiActivityEnable(CONCURRENT_KERNEL)
        if rc != 0:
            raise ProfilerUnavailable(f"cuptiActivityEnable returned {rc}")
        try:
            result = call()
        finally:
            self.lib.cuptiActivityDisable(CONCURRENT_KERNEL)
            self.lib.cuptiActivityFlushAll(FLUSH_FORCED)
        return result, sorted(self.records, key=lambda r: r.start_ns)


_client: _Client | None = None


def _library_paths() -> Iterator[str]:
    """libcupti from the CUDA wheels torch depends on, then a CUDA toolkit, then the loader's path."""
    try:
        import nvidia

        for base in nvidia.__path__:
            yield from sorted(glob.glob(os.path.join(base, "*", "lib", "libcupti.so*")))
    except ImportError:
        pass
    for home in filter(None, (os.environ.get("CUDA_HOME"), "/usr/local/cuda")):
        yield from sorted(glob.glob(os.path.join(home, "extras", "CUPTI", "lib64", "libcupti.so*")))
    found = ctypes.util.find_library("cupti")
    if found:
        yield found


def client() -> _Client:
    global _client
    if _client is None:
        for path in _library_paths():
            try:
                _client = _Client(ctypes.CDLL(path))
                break
            except OSError:
                continue
        else:
            raise ProfilerUnavailable("no CUPTI library (libcupti) was found")
    return _client


_marker: Any = None


def mark() -> None:
    """One tiny kernel on the current stream, the same every time: the markers `trace` looks for."""
    import torch

    global _marker
    if _marker is None:
        _marker = torch.zeros(1, device="cuda")
    _marker.add_(1)


@dataclass
class Window:
    """The timed region of a traced call in GPU time: from the end of the spin that opened it
    to the start of the marker that closed it, both on the caller's stream."""

    opened_ns: int
    closed_ns: int

    def holds(self, record: KernelRecord) -> bool:
        return self.opened_ns <= record.start_ns and record.end_ns <= self.closed_ns


def trace(call: Callable[[], Any]) -> tuple[Any, list[KernelRecord], int, Window | None]:
    """Run `call` between two marker kernels on the caller's stream; its result, the kernels it
    launched (all streams, in start order, markers left out), the caller's stream id as CUPTI
    numbers it, and the timed window when the call opened one (a spin, then its work, then `mark()`
    on the caller's stream: `pipeline/child_call.py` times the profiled call that way)."""
    import torch

    mark()
    torch.cuda.synchronize()

    def bracketed() -> Any:
        mark()
        result = call()
        mark()
        torch.cuda.synchronize()
        return result

    global _client
    try:
        result, records = client().collect(bracketed)
    finally:
        # detach: a process CUPTI stays attached to launches kernels about 0.5 us slower (H200),
        # and timed calls follow this one
        if _client is not None:
            _client.lib.cuptiFinalize()
            _client = None
    # the first marker starts first (the GPU was idle and it was queued before the call); the
    # second is the last kernel on the caller's stream. Everything else is the call's, whichever
    # stream it ran on and whenever it ended.
    caller = [r for r in records if records and r.stream == records[0].stream]
    if len(caller) < 2 or caller[0].name != caller[-1].name or \
            not all(r.end_ns >= r.start_ns > 0 and r.name for r in records):
        raise ProfilerUnavailable("the profiler's marker kernels did not read back as launched")
    markers = [caller[0], caller[-1]]
    window = None
    if len(caller) >= 4 and "spin" in caller[1].name and caller[-2].name == caller[0].name:
        window = Window(caller[1].end_ns, caller[-2].start_ns)
        markers += [caller[1], caller[-2]]
    return result, [r for r in records if all(r is not m for m in markers)], caller[0].stream, window
