"""The sealed timer on the CPU: built, loaded and sealed in a fresh process, which the kernel
then holds to the seal. Each case runs in its own interpreter: a seal lasts as long as its process."""

import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from rooftop.integrity.seal import SealError, library_path

SEAL = """
import ctypes, mmap, os, sys
from rooftop.integrity.seal import library_path, seal_timer
sealed = seal_timer(library_path())
libc = ctypes.CDLL(None, use_errno=True)
start, end = sealed.start, sealed.end
"""


def sealed_process(code: str) -> subprocess.CompletedProcess:
    try:
        library_path()
    except SealError as exc:
        pytest.skip(str(exc))
    return subprocess.run([sys.executable, "-c", SEAL + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60)


def killed_by_seal(done: subprocess.CompletedProcess) -> bool:
    return done.returncode == -signal.SIGSYS


def test_the_sealed_clock_times_a_call_and_carries_its_exception():
    done = sealed_process("""
        import time
        took = sealed.timer.cpu_time(lambda: time.sleep(0.02))
        assert 0.02 <= took < 5, took  # the call's time, not a figure from elsewhere (a loaded host stretches it)
        try:
            sealed.timer.cpu_time(lambda: 1 / 0)
        except ZeroDivisionError:
            print("carried")
    """)
    assert done.returncode == 0, done.stderr
    assert "carried" in done.stdout


@pytest.mark.parametrize("target", ["start", "end - 4096", "start - 4096, 8192", "start - (1 << 40), (1 << 40) + 1"])
def test_changing_the_protection_of_any_sealed_page_kills_the_process(target):
    address, _, length = target.partition(", ")
    done = sealed_process(f"""
        libc.mprotect(ctypes.c_void_p({address}), ctypes.c_size_t({length or 4096}), 7)
        print("survived")
    """)
    assert killed_by_seal(done), (done.returncode, done.stdout, done.stderr)
    assert "survived" not in done.stdout


@pytest.mark.parametrize("call", ["munmap(ctypes.c_void_p(start), ctypes.c_size_t(4096))",
                                  "madvise(ctypes.c_void_p(start), ctypes.c_size_t(4096), 4)",
                                  "mmap(ctypes.c_void_p(start), ctypes.c_size_t(4096), 3, 0x22 | 0x10, -1, 0)",
                                  "syscall(101, 16, os.getppid(), 0, 0)"])  # ptrace(PTRACE_ATTACH)
def test_unmapping_replacing_or_tracing_is_killed(call):
    done = sealed_process(f"""
        libc.{call}
        print("survived")
    """)
    assert killed_by_seal(done), (done.returncode, done.stdout, done.stderr)


def test_pages_beside_the_seal_and_other_processes_are_untouched():
    """The filter is inherited by every process the child starts, where the same addresses mean
    other pages: only the sealed range is refused, and an exec'd compiler runs as before."""
    done = sealed_process("""
        buffer = mmap.mmap(-1, 1 << 20)
        address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
        assert libc.mprotect(ctypes.c_void_p(address), ctypes.c_size_t(4096), 1) == 0
        assert libc.mprotect(ctypes.c_void_p(end), ctypes.c_size_t(0), 1) in (0, -1)
        assert subprocess.run(["cc", "--version"], capture_output=True).returncode == 0
        print("fine")
    """.replace("assert subprocess", "import subprocess; assert subprocess"))
    assert done.returncode == 0 and "fine" in done.stdout, done.stderr


def test_writes_through_proc_self_mem_are_refused():
    """/proc/self/mem writes past page protections (copy-on-write of a private page); the sealed
    pages are a shared mapping of a write-sealed memfd, where that write fails."""
    done = sealed_process("""
        address = ctypes.cast(sealed.timer.lib.rt_cpu_time, ctypes.c_void_p).value
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(address)
            try:
                memory.write(b"\\xc3")
                print("written")
            except OSError as exc:
                print("refused", exc.errno)
        assert sealed.timer.cpu_time(lambda: None) > 0
    """)
    assert done.returncode == 0, done.stderr
    assert "refused" in done.stdout and "written" not in done.stdout


def _floor(untimed_us: float, harness_us: list[float], after_us: list[float], reported_us: float = 50.0,
           device: str = "cuda"):
    from types import SimpleNamespace

    from rooftop.pipeline.trusted.outcomes import ShapeTimed
    from rooftop.pipeline.trusted.timing import judge_floor
    from rooftop.problem.spec import Shape
    from rooftop.verdict import Gate

    shape = Shape(name="s", params={})
    ev = SimpleNamespace(setup=SimpleNamespace(harness_cost={"s": [x / 1e6 for x in harness_us]}),
                         device=device)
    result = ShapeTimed(gate=Gate.timing, shape="s")
    result.candidate = SimpleNamespace(median=reported_us / 1e6)
    forged = judge_floor(ev, shape, result, [untimed_us / 1e6 + 1e-6 * (i % 3) for i in range(50)],
                         [x / 1e6 for x in after_us])
    return result, result.warnings, forged


def test_the_wall_floor_passes_the_harness_noise_and_names_work_it_did_not_time():
    result, warnings, forged = _floor(untimed_us=1094, harness_us=[757, 766, 819, 862, 864, 943, 990, 1000],
                                      after_us=[1034, 1037, 1063])  # an honest call on an H100, as measured
    assert result.harness_seconds == pytest.approx(863e-6) and warnings == [] and forged is None
    _, _, forged = _floor(untimed_us=1094 + 3000, harness_us=[757, 766, 819, 862, 864, 943, 990, 1000], after_us=[])
    assert forged is not None and forged.startswith("[wall-floor]")
    _, warnings, forged = _floor(untimed_us=900, harness_us=[800] * 8, after_us=[3000] * 8)
    assert warnings and "[wall-floor]" in warnings[0] and forged is None


def test_a_cpu_s_wall_floor_speaks_of_the_cpu_and_a_shared_one_says_nothing_was_forged(monkeypatch):
    """A CPU has no spin; and on a shared CPU a breach is the machine's load, not a forgery."""
    from types import SimpleNamespace

    from rooftop.pipeline.trusted import timing
    from rooftop.pipeline.trusted.outcomes import ShapeTimed
    from rooftop.problem.spec import Shape
    from rooftop.verdict import Gate

    _, _, forged = _floor(untimed_us=9000, harness_us=[800] * 8, after_us=[], device="cpu")
    assert forged is not None and "GPU" not in forged and "spin" not in forged
    monkeypatch.setattr(timing, "_time_once", lambda *args: forged)
    monkeypatch.setattr(timing, "sample_load", lambda pids: None)
    monkeypatch.setattr(timing, "assess", lambda *args: SimpleNamespace(contended=True, reasons=["busy"]))
    monkeypatch.setattr(timing.time, "sleep", lambda seconds: None)
    ev = SimpleNamespace(device="cpu", setup=SimpleNamespace(cpu_load=None), own_pids=lambda: [])
    result = ShapeTimed(gate=Gate.timing, shape="s")
    result.candidate = result.reference = SimpleNamespace(samples=[])
    timing.time_shape(ev, Shape(name="s", params={}), result, None, False)
    warning = result.warnings[1]
    assert warning.startswith("[wall-floor]") and "forged or" not in warning and "nothing says" in warning


@pytest.mark.parametrize("contended, breaches", [(False, 2), (False, 1), (True, 2)])
def test_on_a_cpu_the_wall_floor_rejects_only_what_a_quiet_machine_timed_twice(monkeypatch, contended, breaches):
    """A shared CPU slows the harness's own work past what it measured before: there a breach of
    the floor is a warning beside the contention flag (whose shape the reward ignores). On a quiet
    machine it is a rejection when a second timing breaches it too (a two-core machine once held an
    honest call 4 % past the floor with no load its counters saw); a clean second timing passes."""
    from types import SimpleNamespace

    from rooftop.pipeline.trusted import timing
    from rooftop.pipeline.trusted.outcomes import ShapeTimed
    from rooftop.problem.spec import Shape
    from rooftop.verdict import Gate, GateFailed, Status

    breach = "[wall-floor] shape 's': 4068 us of work went untimed"
    timings = []

    def once(*args):
        timings.append(len(timings))
        return breach if len(timings) <= breaches else None

    monkeypatch.setattr(timing, "_time_once", once)
    monkeypatch.setattr(timing, "sample_load", lambda pids: None)
    monkeypatch.setattr(timing, "assess", lambda *args: SimpleNamespace(contended=contended, reasons=["busy"]))
    monkeypatch.setattr(timing.time, "sleep", lambda seconds: None)
    ev = SimpleNamespace(device="cpu", setup=SimpleNamespace(cpu_load=None), own_pids=lambda: [])
    result = ShapeTimed(gate=Gate.timing, shape="s")
    result.candidate = result.reference = SimpleNamespace(samples=[])
    if contended:
        timing.time_shape(ev, Shape(name="s", params={}), result, None, False)
        assert result.flags == ["contention"]
        assert result.warnings[0].startswith("[contention]") and result.warnings[1].startswith(breach)
    elif breaches == 2:
        with pytest.raises(GateFailed) as failed:
            timing.time_shape(ev, Shape(name="s", params={}), result, None, False)
        assert failed.value.status is Status.rejected and failed.value.messages[0].startswith(breach)
        assert "twice" in failed.value.messages[0]
    else:
        timing.time_shape(ev, Shape(name="s", params={}), result, None, False)
        assert result.flags == [] and result.warnings[0].startswith(breach)
        assert "timed again" in result.warnings[0]
    assert len(timings) == 2


def test_a_cuda_error_is_reported_with_the_driver_s_words_for_it():
    """`CUDA error 700` alone says little; the driver's string says an illegal memory access."""
    from rooftop.integrity.seal import SealedTimer

    timer = SealedTimer.__new__(SealedTimer)
    timer._error_string = None  # no driver here: the code alone
    assert timer._cuda_error(700) == "CUDA error 700"

    def error_string(code: int, text: Any) -> int:
        if code != 700:
            return 1  # CUDA_ERROR_INVALID_VALUE: a code the driver does not know
        text._obj.value = b"an illegal memory access was encountered"  # byref(c_char_p)
        return 0

    timer._error_string = error_string
    assert timer._cuda_error(700) == "CUDA error 700: an illegal memory access was encountered"
    assert timer._cuda_error(12345) == "CUDA error 12345"


@pytest.mark.parametrize("breaches", [1, 2])
def test_on_a_gpu_the_wall_floor_rejects_what_a_second_timing_holds_too(monkeypatch, breaches):
    """A burst of other work on the host can hold an honest shape's calls past the floor once; a
    forger's untimed work is in every timing. The shape is timed again before it is rejected, and
    the first timing's flags and warnings give way to the second's."""
    from types import SimpleNamespace

    from rooftop.pipeline.trusted import timing
    from rooftop.pipeline.trusted.outcomes import ShapeTimed
    from rooftop.problem.spec import Shape
    from rooftop.verdict import Gate, GateFailed, Status

    breach = "[wall-floor] shape 's': 12164 us of work went untimed"
    timings = []

    def once(ev, shape, result, policy, profiled):
        timings.append(len(timings))
        result.flags.append("host-bound")
        result.warnings.append(f"[host-bound] timing {len(timings)}")
        return breach if len(timings) <= breaches else None

    monkeypatch.setattr(timing, "_time_once", once)
    monkeypatch.setattr(timing.time, "sleep", lambda seconds: None)
    ev = SimpleNamespace(device="cuda")
    result = ShapeTimed(gate=Gate.timing, shape="s")
    if breaches == 2:
        with pytest.raises(GateFailed) as failed:
            timing.time_shape(ev, Shape(name="s", params={}), result, None, False)
        assert failed.value.status is Status.rejected and failed.value.messages[0].startswith(breach)
        assert "twice" in failed.value.messages[0] and len(timings) == 2
        return
    timing.time_shape(ev, Shape(name="s", params={}), result, None, False)
    assert len(timings) == 2 and result.flags == ["host-bound"]
    assert result.warnings[0] == "[host-bound] timing 2"
    assert result.warnings[1].startswith(breach) and "timed again" in result.warnings[1]


def test_timed_blocks_hold_about_20_ms_of_calls_and_at_most_a_gib_of_expected_outputs():
    """The timing gate queues timed calls in blocks (pipeline/trusted/calls.py): 16 calls of a 50 us
    kernel, one of a 30 ms one, and never more expected outputs than 1 GiB on the trusted side."""
    from types import SimpleNamespace

    import torch

    from rooftop.pipeline.trusted.timing import BLOCK_CALLS, _BlockSize

    def sized(seconds: float, reference: float, out_bytes: int) -> int:
        sizes = _BlockSize()
        expected = torch.empty(out_bytes, dtype=torch.uint8, device="meta")
        sizes.saw(SimpleNamespace(reply=SimpleNamespace(seconds=seconds), reference_seconds=reference,
                                  expected=expected))
        return sizes.next()

    assert sized(50e-6, 60e-6, 1 << 20) == BLOCK_CALLS
    assert sized(2e-3, 4e-3, 1 << 20) == 5  # the slower side's calls set it
    assert sized(30e-3, 30e-3, 1 << 20) == 1
    assert sized(50e-6, 50e-6, 300 << 20) == 3  # 1 GiB of 300 MiB outputs
    assert sized(50e-6, 50e-6, 2 << 30) == 1
