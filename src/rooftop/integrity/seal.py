"""The sealed timer: the timed call's clock work in a compiled library (`sealed_timer.c`) that the
evaluation child loads before any candidate code and then makes impossible to rewrite.

Native candidate code (ctypes, a `load_inline` extension) can write any writable page of its
process. Sealing takes the timer's pages out of reach, three ways:

- every mapping of the library is replaced by a shared, read-only mapping of a memfd holding the
  same bytes, sealed against writes: `mprotect` cannot make it writable again, and writes through
  `/proc/self/mem` or `ptrace` (which can write read-only private pages) fail on a shared one;
- `mseal` where the kernel has it (Linux 6.10): the mappings cannot be unmapped, moved or changed;
- a seccomp filter, installed on every thread, that kills the process (SIGSYS) when anything
  tries to change, unmap, replace or move those pages, or calls `ptrace` or `process_vm_writev`.
  The trusted side reads that death as `rejected` with `[sealed]`.

What the seal cannot do is make the number trustworthy after it leaves the library: the Python
that carries it to the channel lives in writable memory. The trusted side's wall floor
(`pipeline/trusted/timing.py`) bounds that.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import mmap
import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooftop import config
from rooftop.integrity.seccomp import MAP_FIXED, SYS, install_filter

SOURCE = Path(__file__).with_name("sealed_timer.c")
TIMER_ENV = config.SEALED_TIMER  # the built library's path, handed to the child at spawn

F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE, F_SEAL_FUTURE_WRITE = 0x1, 0x2, 0x4, 0x8, 0x10


class SealError(Exception):
    """The timer could not be built, loaded or sealed here; the reason says why."""


# -- building ---------------------------------------------------------------------------------
def library_path() -> Path:
    """The built timer for this source and machine, built once (by a trusted process) into the cache."""
    from rooftop.build.cache import cache_root

    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SealError("no C compiler (cc) to build the sealed timer with")
    key = hashlib.sha256(SOURCE.read_bytes() + platform.machine().encode() + compiler.encode()).hexdigest()[:24]
    path = cache_root() / "sealed" / f"timer-{key}.so"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    command = [compiler, "-O2", "-shared", "-fPIC", "-nostartfiles", "-fno-plt", "-fno-stack-protector", "-Wl,-z,now",
               "-Wl,-z,relro", "-o", str(partial), str(SOURCE), "-ldl"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise SealError(f"building the sealed timer failed: {(done.stderr or done.stdout).strip()[:300]}")
    partial.replace(path)
    return path


# -- the library --------------------------------------------------------------------------------
CPU_CALL = ctypes.CFUNCTYPE(ctypes.c_int)
TAKE_BATCH = 4096


class TraceRecord(ctypes.Structure):
    """One kernel as the tracer keeps it (`struct trace_record` in sealed_timer.c)."""

    _fields_ = [("start", ctypes.c_uint64), ("end", ctypes.c_uint64), ("stream", ctypes.c_uint32),
                ("tag", ctypes.c_uint32), ("name", ctypes.c_char_p)]


class SealedTimer:
    """The loaded library's entry points."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.rt_cuda_init.argtypes = [ctypes.c_ulonglong, ctypes.c_uint]
        self.lib.rt_cuda_init.restype = ctypes.c_int
        self.lib.rt_cuda_hold.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
        self.lib.rt_cuda_hold.restype = ctypes.c_int
        self.lib.rt_cuda_begin.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        self.lib.rt_cuda_begin.restype = ctypes.c_int
        self.lib.rt_cuda_end.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        self.lib.rt_cuda_end.restype = ctypes.c_int
        self.lib.rt_cuda_elapsed.argtypes = [ctypes.c_uint]
        self.lib.rt_cuda_elapsed.restype = ctypes.c_double
        self.lib.rt_cuda_close.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.lib.rt_cuda_close.restype = ctypes.c_int
        self.lib.rt_trace_init.argtypes = [ctypes.c_char_p]
        self.lib.rt_trace_init.restype = ctypes.c_int
        self.lib.rt_trace_flush.restype = ctypes.c_int
        self.lib.rt_trace_enable.argtypes = [ctypes.c_int]
        self.lib.rt_trace_enable.restype = ctypes.c_int
        self.lib.rt_trace_take.argtypes = [ctypes.POINTER(TraceRecord), ctypes.c_long, ctypes.POINTER(ctypes.c_uint64)]
        self.lib.rt_trace_take.restype = ctypes.c_long
        self.lib.rt_cpu_time.argtypes = [CPU_CALL]
        self.lib.rt_cpu_time.restype = ctypes.c_double
        self.lib.rt_state.restype = ctypes.c_void_p
        self.cuda = False
        self.tracing = False  # the tracer is attached
        self.recording = False  # ... and its kernel records are on (a trusted copy turns them off and on)
        self._error_string: Any = None

    def init_cuda(self, flush_bytes: int, flush_blocks: int) -> None:
        rc = self.lib.rt_cuda_init(flush_bytes, flush_blocks)
        if rc != 0:
            raise SealError(f"the sealed timer's CUDA setup failed (code {rc})")
        self.cuda = True
        try:  # the driver's own words for a code, looked up now: before the seal, and before any fault
            self._error_string = ctypes.CDLL("libcuda.so.1").cuGetErrorString
            self._error_string.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            self._error_string.restype = ctypes.c_int
        except (OSError, AttributeError):
            self._error_string = None

    def _cuda_error(self, code: int) -> str:
        """`CUDA error 700: an illegal memory access was encountered`: the code and what it means."""
        text = ctypes.c_char_p()
        if self._error_string is not None and self._error_string(code, ctypes.byref(text)) == 0 and text.value:
            return f"CUDA error {code}: {text.value.decode(errors='replace')}"
        return f"CUDA error {code}"

    def cuda_hold(self, stream: int, hold_cycles: int) -> None:
        """Queue the spin that opens a timed call on `stream`, before its inputs are made."""
        rc = self.lib.rt_cuda_hold(stream, hold_cycles)
        if rc != 0:
            raise RuntimeError(f"the sealed timer could not start a timed call ({self._cuda_error(rc)})")

    def cuda_begin(self, stream: int, slot: int) -> None:
        """Queue the flush and the start event of the block's call `slot` on `stream`, after its inputs."""
        rc = self.lib.rt_cuda_begin(stream, slot)
        if rc != 0:
            raise RuntimeError(f"the sealed timer could not start a timed call ({self._cuda_error(rc)})")

    def cuda_end(self, stream: int, slot: int) -> None:
        """Queue the end event of call `slot` on `stream` (not waited for: see `cuda_elapsed`)."""
        rc = self.lib.rt_cuda_end(stream, slot)
        if rc != 0:
            raise RuntimeError(f"the sealed timer could not end a timed call ({self._cuda_error(rc)})")

    def cuda_elapsed(self, slot: int) -> float:
        """Seconds between call `slot`'s events, once its end event has been reached."""
        seconds = self.lib.rt_cuda_elapsed(slot)
        if seconds < 0:
            raise RuntimeError(f"the sealed timer could not read a timed call ({self._cuda_error(int(-seconds))})")
        return float(seconds)

    def cuda_close(self, stream: int, wait: bool = True) -> None:
        """After a call: wait for all its work (unless it is one of a block's, queued on), then mark
        its end for the tracer on `stream`."""
        rc = self.lib.rt_cuda_close(stream, int(wait))
        if rc != 0:
            raise RuntimeError(f"the sealed timer could not close a call ({self._cuda_error(rc)})")

    def init_trace(self, cupti_library: str) -> None:
        """Attach CUPTI's kernel records through the library's own callbacks, on from now on."""
        rc = self.lib.rt_trace_init(cupti_library.encode())
        if rc != 0:
            raise SealError(f"the kernel tracer could not attach CUPTI ({cupti_library}): code {rc}")
        self.tracing = self.recording = True

    def record(self, on: bool) -> None:
        """Turn the attached tracer's kernel records on or off (a trusted process's copy only)."""
        if on == self.recording:
            return
        rc = self.lib.rt_trace_enable(int(on))
        if rc != 0:
            raise RuntimeError(f"turning CUPTI's kernel records {'on' if on else 'off'} failed (code {rc})")
        self.recording = on

    def take_trace(self) -> tuple[list[TraceRecord], int]:
        """Every kernel record since the last take (CUPTI flushed first), and the records lost so far."""
        rc = self.lib.rt_trace_flush()
        if rc != 0:
            raise RuntimeError(f"flushing CUPTI's kernel records failed (code {rc})")
        records: list[TraceRecord] = []
        dropped = ctypes.c_uint64()
        while True:
            batch = (TraceRecord * TAKE_BATCH)()
            n = self.lib.rt_trace_take(batch, TAKE_BATCH, ctypes.byref(dropped))
            if n < 0:
                raise RuntimeError("the kernel tracer is not attached")
            records.extend(batch[:n])
            if n < TAKE_BATCH:
                return records, int(dropped.value)

    def cpu_time(self, call: Callable[[], Any]) -> float:
        """Seconds `call` took by the library's clock; an exception it raised is raised here."""
        failure: list[BaseException] = []

        def run() -> int:
            try:
                call()
                return 0
            except BaseException as exc:  # noqa: BLE001  (carried across the C frame and raised below)
                failure.append(exc)
                return 1

        seconds = self.lib.rt_cpu_time(CPU_CALL(run))
        if failure:
            raise failure[0]
        return float(seconds)


def setup_cuda(timer: SealedTimer, traced: bool) -> str:
    """The timer's device state on the current CUDA device (a flush buffer twice the L2, the harness's
    kernels, the event pair) and, when `traced`, the kernel tracer: why it is not attached, or "".
    The child and the trusted side set theirs up here alike."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0)) or 64 << 20
    timer.init_cuda(2 * l2, 4 * props.multi_processor_count)
    if not traced:
        return "the job asked for no tracing"
    from rooftop.integrity.cupti import library_path as cupti_library

    path = cupti_library()
    if path is None:
        return "no CUPTI library (libcupti) was found"
    try:
        timer.init_trace(path)
    except SealError as exc:
        return str(exc)
    return ""


# -- the trusted side's copy ------------------------------------------------------------------
_in_child = False
_trusted: tuple[int, SealedTimer | None, str] | None = None  # (device index, timer, why none)


def mark_child() -> None:
    """This process is an evaluation child: its timer is the sealed one or none, never a trusted copy."""
    global _in_child
    _in_child = True


def trusted_timer(index: int) -> tuple[SealedTimer | None, str]:
    """The timer library in a trusted process (the evaluating side, baselines), loaded unsealed on
    CUDA device `index` with the kernel tracer attached: the flush, the spin, the opening kernel,
    the event pair and CUPTI's kernel records of a candidate's timed call, on the reference's too.
    CUPTI's kernel records cost memory-bound kernels up to 5 % of their time on an H200 (the same
    whether attached before or after their modules load), so a reference timed without them was
    favoured by that much. Once per process, on one device; (None, why) where it cannot be had."""
    global _trusted
    if _in_child:
        return None, "an evaluation child has only its sealed timer"
    if _trusted is None:
        import torch

        timer: SealedTimer | None = None
        try:
            timer = SealedTimer(library_path())
            with torch.cuda.device(index):
                torch.empty(1, device=f"cuda:{index}")  # the context current here, where the timer's state is made
                why = setup_cuda(timer, traced=True)
        except (SealError, OSError) as exc:
            timer, why = None, str(exc)
        _trusted = (index, timer, why)
    if _trusted[0] != index:
        return None, f"this process's timer is set up on CUDA device {_trusted[0]}, not {index}"
    return _trusted[1], _trusted[2]


# -- sealing ----------------------------------------------------------------------------------
@dataclass
class Mapping:
    start: int
    end: int
    perms: str


def mappings_of(path: Path) -> list[Mapping]:
    """This process's mappings of one file, from /proc/self/maps."""
    found = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5] == str(path):
            start, end = (int(x, 16) for x in parts[0].split("-"))
            found.append(Mapping(start, end, parts[1]))
    return found


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.syscall.restype = ctypes.c_long


def _remap_shared(mapping: Mapping) -> None:
    """Replace one mapping by a shared, read-only mapping of a write-sealed memfd with its bytes."""
    size = mapping.end - mapping.start
    data = ctypes.string_at(mapping.start, size)
    fd = os.memfd_create("rooftop-sealed-timer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.write(fd, data)
        seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals | F_SEAL_FUTURE_WRITE)
        except OSError:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        prot = mmap.PROT_READ | (mmap.PROT_EXEC if "x" in mapping.perms else 0)
        got = _libc.mmap(mapping.start, size, prot, mmap.MAP_SHARED | MAP_FIXED, fd, 0)
        if got != mapping.start:
            raise SealError(f"remapping the timer's pages failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def _mseal(start: int, size: int) -> bool:
    """mseal(2) on the range: True when sealed, False where the kernel does not have it."""
    if _libc.syscall(SYS["mseal"], ctypes.c_ulong(start), ctypes.c_size_t(size), ctypes.c_ulong(0)) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EPERM):
        return False
    raise SealError(f"mseal failed: {os.strerror(err)}")


@dataclass
class Sealed:
    """The timer of this process, and how it was sealed."""

    timer: SealedTimer
    start: int
    end: int
    mseal: bool

    def describe(self) -> str:
        return f"sealed timer: memfd pages, seccomp{', mseal' if self.mseal else ''}"


_active: Sealed | None = None


def active() -> Sealed | None:
    """The sealed timer of this process, once `seal_timer` has run."""
    return _active


def seal_timer(path: Path, cuda: Callable[[SealedTimer], None] | None = None) -> Sealed:
    """Load the timer, let `cuda` set up its device state, then seal it (once per process)."""
    global _active
    if _active is not None:
        return _active
    if platform.machine() != "x86_64" or not hasattr(os, "memfd_create"):
        raise SealError(f"sealing is implemented for Linux on x86_64, not {platform.system()} {platform.machine()}")
    timer = SealedTimer(path)
    if cuda is not None:
        cuda(timer)
    maps = mappings_of(timer.path)
    state = int(timer.lib.rt_state())
    if not maps or not any(m.start <= state < m.end for m in maps):
        raise SealError("the timer's pages were not found in /proc/self/maps")
    for mapping in maps:
        _remap_shared(mapping)
    start, end = min(m.start for m in maps), max(m.end for m in maps)
    sealed_by_kernel = all([_mseal(m.start, m.end - m.start) for m in maps])
    try:
        install_filter(start, end)
    except OSError as exc:
        raise SealError(str(exc)) from exc
    _active = Sealed(timer, start, end, sealed_by_kernel)
    return _active
