"""Faults a candidate can commit, driven through `rooftop batch` as users run it. Each faulty
candidate is followed by a copy of the honest one (its own job), which must get the verdict the
honest candidate gets alone, from the same worker, with no process left running and the machine
as it was before.

Faults that only the machine itself would stop here (host memory, an unbounded fork bomb) run
only where the sandbox's limits bound them; elsewhere they are skipped, saying which limit is
missing, rather than left to take the machine down.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES

from rooftop.integrity.sandbox import bwrap_path
from rooftop.service.queue import MAX_ATTEMPTS
from rooftop.store.db import Store
from rooftop.verdict import Status, Verdict

SCALE = str(FIXTURES / "problems/scale")
GOOD = FIXTURES / "solutions/good.py"
FAULTS = FIXTURES / "solutions/faults"
GiB = 1 << 30
TIMEOUT = 20  # seconds per gate: what the hang costs; twice what the 4 GiB tmpfs write took on a busy 2-core machine

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="needs bubblewrap: these faults are contained by it")


# -- the machine ---------------------------------------------------------------------------------
def _meminfo(field: str) -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith(field + ":"))


def sandbox_limits() -> dict[str, int | None]:
    """The soft limits a sandboxed CPU child starts with, read back from a process started under
    them (None: unlimited), by their /proc/self/limits names."""
    from rooftop.integrity.sandbox import plan

    scratch = Path(os.environ.get("ROOFTOP_CACHE", "/tmp")) / "limits-probe"
    limits = plan("none", scratch=scratch, writable=[], readable=[], device="cpu", extra_env={}).limits
    text = subprocess.run([sys.executable, "-c", "print(open('/proc/self/limits').read())"], capture_output=True,
                          text=True, check=True, preexec_fn=limits.apply).stdout
    found: dict[str, int | None] = {}
    for name, soft in re.findall(r"^(Max [a-z ]+?)\s{2,}(\S+)", text, re.MULTILINE):
        found[name] = None if soft == "unlimited" else int(soft)
    return found


def _leftovers(folder: Path) -> list[int]:
    """Processes that name `folder` (where the batch's input, TMPDIR and scratch folders live) in
    their command line, environment or working folder: the orchestrator, its workers, their
    children and whatever those started, sandboxed or not."""
    needle = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if any(needle in _read(entry, what) for what in ("cmdline", "environ", "cwd")):
            found.append(int(entry.name))
    return found


def _read(process: Path, what: str) -> bytes:
    try:
        return os.fsencode(os.readlink(process / what)) if what == "cwd" else (process / what).read_bytes()
    except OSError:  # gone, or not ours to read
        return b""


def _settled_leftovers(folder: Path, wait: float = 10.0) -> list[int]:
    """Leftovers once the dying have had `wait` seconds to go."""
    deadline = time.monotonic() + wait
    while (left := _leftovers(folder)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@dataclass
class Machine:
    """What a fault could leave behind on the machine. Memory is judged by the tmpfs pages in use
    (Shmem, where a sandbox's /tmp lives), not by the memory available, which other work on a
    shared machine moves by gigabytes."""

    shmem: int  # bytes in tmpfs and shared memory
    available: int  # bytes of memory the kernel could hand out
    disk_free: int  # bytes free where the batch wrote

    @classmethod
    def now(cls, folder: Path) -> Machine:
        import shutil

        return cls(_meminfo("Shmem"), _meminfo("MemAvailable"), shutil.disk_usage(folder).free)

    def assert_recovered(self, before: Machine, folder: Path) -> None:
        # the margins are for other work; a fault's leftovers (a 4 GiB file in a sandbox's /tmp,
        # a 2 GiB log, a scratch folder) exceed them
        assert self.shmem < before.shmem + GiB, (before, self)
        assert self.available > GiB, (before, self)
        assert self.disk_free > before.disk_free - 2 * GiB, (before, self)
        assert not list(folder.glob("tmp/rooftop-eval-*"))  # every scratch folder was removed


# -- the batch -----------------------------------------------------------------------------------
@dataclass
class Ran:
    name: str
    job: dict
    verdict: Verdict | None


def run_batch(tmp_path: Path, faults: list[str], *options: str) -> tuple[subprocess.CompletedProcess, list[Ran]]:
    """`rooftop batch` over one JSONL file: the honest candidate alone, then each fault followed by a
    copy of the honest one. The jobs in that order, each with its verdict. The command gets its own
    session, so nothing a candidate does to its parent's process group reaches this test."""
    honest = GOOD.read_text()
    lines = [("alone", {"problem": SCALE, "code": honest + "\n# alone\n", "name": "good_alone.py"})]
    for fault in faults:
        lines.append((fault, {"problem": SCALE, "solution": str(FAULTS / f"{fault}.py")}))
        lines.append((f"after {fault}", {"problem": SCALE, "code": honest + f"\n# after {fault}\n",
                                         "name": f"good_after_{fault}.py"}))
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps(line) + "\n" for _, line in lines))
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    db = tmp_path / "r.db"
    env = {**os.environ, "COLUMNS": "200", "TMPDIR": str(temp)}
    proc = subprocess.run([sys.executable, "-m", "rooftop", "batch", str(batch), "--db", str(db), "--json", *options],
                          capture_output=True, text=True, env=env, timeout=600, start_new_session=True)
    if proc.returncode not in (0, 1):
        return proc, []
    jobs = json.loads(proc.stdout)
    store = Store(db, must_exist=True)
    try:
        verdicts = [store.evaluations.verdict(j["evaluation_id"]) if j["evaluation_id"] is not None else None
                    for j in jobs]
    finally:
        store.close()
    return proc, [Ran(name, job, verdict) for (name, _), job, verdict in zip(lines, jobs, verdicts)]


def _check_in_order_by_one_worker(ran: list[Ran]) -> None:
    """Every job judged once, on the one CPU worker, in submission order: each honest copy is the
    job right after its fault, on the worker the fault ran on."""
    judged = [r for r in ran if r.verdict is not None]
    assert all(r.job["attempts"] == 1 and r.job["device"] == "cpu:0" for r in judged), [r.job for r in judged]
    ids = [r.job["evaluation_id"] for r in judged]
    assert ids == sorted(ids)


# -- faults contained by the sandbox, one batch ----------------------------------------------------
# fault: (status, a phrase of its first message). kill_parent and fork_bounded reach nothing they
# aim at from inside the sandbox (its own PID namespace), then answer correctly: `correct` is right.
EXPECTED: dict[str, tuple[Status, str | None]] = {
    "segfault": (Status.runtime_error, "killed by SIGSEGV during the correctness gate"),
    "hang": (Status.timeout, f"ran past its {TIMEOUT} s limit"),
    "kill_parent": (Status.correct, None),
    "print_flood": (Status.runtime_error, "killed by SIGSEGV during the correctness gate"),
    "disk_fill": (Status.runtime_error, "File too large"),
    "fork_bounded": (Status.correct, None),
}


def _tmpfs_fill_unsafe() -> str | None:
    """Why filling one file in the sandbox's /tmp (a tmpfs: memory) to the file-size limit would be
    unsafe here; None when it is safe."""
    limit = sandbox_limits().get("Max file size")
    available = _meminfo("MemAvailable")
    if limit is None or 2 * limit > available:
        return f"the sandbox's file-size limit ({limit} bytes) is not below half the memory available ({available})"
    return None


@pytest.mark.slow
@needs_bwrap
def test_faults_are_their_own_verdicts_and_the_next_candidate_is_unaffected(tmp_path):
    """Crash, hang, kill the parent, flood the log, fill /tmp, fork: one worker takes them in turn,
    each followed by an honest copy, which must come out as the honest candidate does alone."""
    faults = [f for f in EXPECTED if f != "disk_fill" or _tmpfs_fill_unsafe() is None]
    before = Machine.now(tmp_path)
    proc, ran = run_batch(tmp_path, faults, "--device", "cpu", "--sandbox", "bwrap", "--timeout", str(TIMEOUT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(ran) == 1 + 2 * len(faults) and all(r.job["state"] == "done" for r in ran), [r.job for r in ran]
    _check_in_order_by_one_worker(ran)
    alone = ran[0].verdict
    assert alone is not None and alone.status is Status.correct
    for fault, after in zip(ran[1::2], ran[2::2], strict=True):
        status, phrase = EXPECTED[fault.name]
        assert fault.verdict is not None and fault.verdict.sandbox == "bwrap"
        assert fault.verdict.status is status, (fault.name, fault.verdict.messages)
        if phrase is not None:
            assert phrase in fault.verdict.messages[0], (fault.name, fault.verdict.messages)
        assert after.verdict is not None and after.verdict.status is alone.status, (after.name, after.verdict.messages)
    flood = next(r for r in ran if r.name == "print_flood").verdict
    assert flood is not None and len(flood.messages[0]) < 2000  # the log's end, not its gigabytes
    assert _settled_leftovers(tmp_path) == []
    Machine.now(tmp_path).assert_recovered(before, tmp_path)


@pytest.mark.slow
def test_a_candidate_that_kills_its_worker_mid_call_fails_alone(tmp_path):
    """Without a sandbox the child's parent is the device worker: it dies in every attempt, is
    replaced each time, and the job fails after its attempts; the next job gets a fresh worker."""
    before = Machine.now(tmp_path)
    proc, ran = run_batch(tmp_path, ["kill_worker"], "--device", "cpu", "--sandbox", "none", "--timeout",
                          str(TIMEOUT))
    assert proc.returncode == 1, proc.stderr[-3000:]  # a job without a verdict
    alone, killer, after = ran
    assert killer.job["state"] == "failed" and killer.verdict is None
    assert killer.job["attempts"] == MAX_ATTEMPTS and "worker" in killer.job["error"], killer.job
    assert alone.verdict is not None and alone.verdict.status is Status.correct
    assert after.verdict is not None and after.verdict.status is alone.verdict.status
    assert after.job["attempts"] == 1
    assert _settled_leftovers(tmp_path) == []
    Machine.now(tmp_path).assert_recovered(before, tmp_path)


# -- faults that setrlimit cannot bound for a tree: the watchdog stops them ----------------------------
@pytest.mark.slow
@needs_bwrap
@pytest.mark.parametrize("fault,phrases", [
    # on a CPU the address-space limit (48 GiB) may refuse first on a host with more than 96 GiB
    ("host_memory", ("[memory]", "MemoryError")),
    ("fork_bomb", ("[processes]",)),
])
def test_a_tree_that_takes_the_host_s_memory_or_processes_is_killed(tmp_path, fault, phrases):
    """Host memory filled, or processes forked without end: the watchdog kills the child's tree
    at its limit (runtime_error, with why), and the next candidate is judged as before."""
    before = Machine.now(tmp_path)
    # the deadline is not what must stop them: filling half a large host takes a while
    proc, ran = run_batch(tmp_path, [fault], "--device", "cpu", "--sandbox", "bwrap", "--timeout", "120")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_in_order_by_one_worker(ran)
    alone, faulty, after = (r.verdict for r in ran)
    assert faulty is not None and faulty.status is Status.runtime_error, faulty
    assert any(phrase in faulty.messages[0] for phrase in phrases), faulty.messages
    assert alone is not None and after is not None and after.status is alone.status is Status.correct
    assert _settled_leftovers(tmp_path) == []
    Machine.now(tmp_path).assert_recovered(before, tmp_path)


def test_a_dead_child_s_log_is_read_from_its_end(tmp_path):
    """The trusted side quotes the end of a crashed child's log; a log of gigabytes (the file-size
    limit allows 4 GiB) must cost it a few kilobytes, not the whole file."""
    from rooftop.pipeline.trusted.session import ChildSession

    log = tmp_path / "child.log"
    with open(log, "wb") as f:
        f.truncate(256 << 20)  # sparse: no disk used
        f.seek(0, os.SEEK_END)
        f.write(b"\nthe last words\n")
    session = ChildSession.__new__(ChildSession)
    session.log_path = log
    tracemalloc.start()
    try:
        tail = session.log_tail()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert tail.endswith("the last words") and peak < 4 << 20


# -- GPU faults ----------------------------------------------------------------------------------
def _speedup_agrees(after: Verdict, alone: Verdict, widen: float = 0.15) -> list[str]:
    """Shapes whose speedup after a fault falls outside the honest run's 95 % interval widened by
    `widen` of its speedup on each side (two evaluations differ by more than one's interval)."""
    base = {s.shape: s for s in alone.shapes}
    off = []
    for shape in after.shapes:
        ref = base[shape.shape]
        if "contention" in shape.flags or "contention" in ref.flags or ref.speedup is None:
            continue
        low = (ref.speedup_low or ref.speedup) - widen * ref.speedup
        high = (ref.speedup_high or ref.speedup) + widen * ref.speedup
        if shape.speedup is None or not low <= shape.speedup <= high:
            off.append(f"{shape.shape}: {shape.speedup} outside [{low:.3g}, {high:.3g}]")
    return off


@pytest.mark.gpu
@pytest.mark.slow
def test_device_faults_leave_the_next_candidate_and_its_timing_unaffected(tmp_path):
    """An illegal memory access poisons only the child's CUDA context, and a child that takes all
    device memory gives it back when it goes: the worker's context, the next child and the next
    timing are as before. Timings are compared by speedup, not medians: the speedup pairs each
    candidate call with a reference call on the same inputs, so a drift of clocks or of the host
    between two evaluations moves both sides and cancels; the interval is widened by 15 % because
    two evaluations differ by more than one evaluation's 95 % interval."""
    proc, ran = run_batch(tmp_path, ["illegal_access", "device_memory"], "--device", "cuda", "--timeout", "120")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(r.job["state"] == "done" and r.job["attempts"] == 1 for r in ran), [r.job for r in ran]
    ids = [r.job["evaluation_id"] for r in ran]
    assert ids == sorted(ids)
    alone, illegal, after_illegal, memory, after_memory = (r.verdict for r in ran)
    assert alone is not None and alone.status is Status.correct
    assert illegal is not None and illegal.status is Status.runtime_error, illegal.messages
    assert "illegal memory access" in " ".join(illegal.messages), illegal.messages
    assert memory is not None and memory.status is Status.runtime_error, memory.messages
    assert "[memory]" in memory.messages[0], memory.messages
    for after in (after_illegal, after_memory):
        assert after is not None and after.status is Status.correct, after
        assert _speedup_agrees(after, alone) == []
    assert _settled_leftovers(tmp_path) == []


# -- a killed evaluator leaves nothing of its child's tree ---------------------------------------
ORPHAN = '''"""Starts a process in a session of its own (as a build starts nvcc), then waits."""
import ctypes
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.fork() == 0:
            os.setsid()
            os.execv("/bin/sleep", ["sleep", "{seconds}"])
        libc.pause()
'''


@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_a_killed_evaluator_leaves_no_process_of_its_child_s_tree(tmp_path, sandbox):
    """SIGKILL of the evaluating process (rooftop eval, batch, a worker) takes its child's whole
    tree with it: a build's compilers, started in sessions of their own, used to run on for minutes.
    Without bwrap the reaper between them (integrity/reaper.py) kills the tree; with bwrap its pid
    namespace dies with it."""
    seconds = f"{600 + os.getpid() % 1000}.{'1' if sandbox == 'none' else '2'}"  # this test's own sleeper
    solution = tmp_path / "orphan.py"
    solution.write_text(ORPHAN.format(seconds=seconds))
    evaluator = subprocess.Popen([sys.executable, "-m", "rooftop", "eval", SCALE, str(solution), "--device", "cpu",
                                  "--sandbox", sandbox, "--timeout", "120"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True, cwd=tmp_path)
    try:
        orphans: list[int] = []
        for _ in range(600):
            orphans = [pid for pid in _descendants(evaluator.pid) if _cmdline(pid) == ["sleep", seconds]]
            if orphans:
                break
            assert evaluator.poll() is None, "the evaluation ended before the candidate started its process"
            time.sleep(0.1)
        assert orphans, "the candidate's process never started"
    finally:
        if evaluator.poll() is None:
            os.killpg(evaluator.pid, 9)
        evaluator.wait()
    for _ in range(100):
        if not any(_running(pid) for pid in orphans):
            break
        time.sleep(0.05)
    assert not any(_running(pid) for pid in orphans), "a process of the killed evaluation's child is still running"


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found += children.get(pid, [])
        todo += children.get(pid, [])
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# -- the disk a child's files take, in all -------------------------------------------------------
@pytest.mark.parametrize("fill", ["bytes", "files"])
def test_a_tree_whose_files_pass_the_disk_bound_is_killed(tmp_path, monkeypatch, fill):
    """The file-size limit bounds one file; the watchdog bounds them all, in the folders the child
    may write on the host, by bytes allocated and by count."""
    from rooftop.integrity import watchdog

    monkeypatch.setattr(watchdog, "EVERY", 0.02)
    monkeypatch.setattr(watchdog, "MAX_FILES", 50)
    folder = tmp_path / "scratch"
    (folder / "home").mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    dog = watchdog.TreeWatchdog(sleeper.pid, None, None, disk=[folder, tmp_path / "absent"],
                                disk_bytes=2 << 20).start()
    try:
        (folder / "home" / "small").write_bytes(b"x" * (1 << 20))
        with open(folder / "sparse", "wb") as f:
            f.truncate(1 << 30)  # a hole takes no disk
        time.sleep(0.5)
        assert sleeper.poll() is None and dog.breach is None
        if fill == "bytes":
            (folder / "home" / "big").write_bytes(b"x" * (3 << 20))
        else:
            for i in range(60):
                (folder / f"f{i}").touch()
        assert sleeper.wait(timeout=10) == -9
        assert dog.breach is not None and dog.breach.startswith("[disk]")
        assert ("more than 50 files" if fill == "files" else "over the limit of 0.0 GiB") in dog.breach
    finally:
        dog.stop()
        if sleeper.poll() is None:
            sleeper.kill()
