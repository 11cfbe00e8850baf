"""Starting an evaluation child: its scratch folder, its sandbox and its environment.

A child can be started ahead of its evaluation (`prestart`): its interpreter and torch then come
up while this process is still importing its own, and the evaluation that asks for a child with
the same solution, problem, device and sandbox takes it. A child that ran nothing is all it is:
it has not seen its job yet, and a child that ran one candidate is never reused for another.
"""

from __future__ import annotations

import atexit
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rooftop.build.cache import cache_root, source_dir
from rooftop.bytecode import for_child as bytecode_for_child
from rooftop.integrity.sandbox import SandboxPlan, plan
from rooftop.measure.contention import cpu_threads, thread_env
from rooftop.pipeline.job import WARM_CUDA, WARM_IMPORTS
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.session import ChildSession
from rooftop.problem.spec import Problem
from rooftop.solution.loader import Solution

PACKAGE = Path(__file__).resolve().parents[2]  # src/rooftop
SCRATCH = "rooftop-eval-"  # a child's scratch folder, in the temporary folder: SCRATCH + its owner's `_owner` + "-"


def child_env(device: str) -> dict[str, str]:
    """What the child's environment adds to the scrubbed one: unbuffered output, our sources on
    the import path, and the interpreter switch for Triton on a CPU. Build locations are set by the
    child itself, which knows its platform."""
    src = str(PACKAGE.parent)
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
        # both sides time with the same fixed thread count (measure/contention.py says why)
        env.update(thread_env(cpu_threads()))
    return env


@dataclass
class Started:
    key: tuple[str, ...]  # solution hash, reference, device, sandbox asked, cache root
    session: ChildSession
    scratch: Path
    sandbox: SandboxPlan


_ahead: list[Started] = []
_registered: list[bool] = []


def _key(problem: Problem, solution: Solution, device: str, sandbox: str, root: Path) -> tuple[str, ...]:
    return (solution.source_hash, str(problem.reference), device, str(getattr(sandbox, "value", sandbox)), str(root))


def _owner(pid: int) -> str | None:
    """The process `pid` as `namespace.pid.start` (its PID namespace, its start time in clock ticks:
    a reused pid names another process); None when it is gone."""
    try:
        namespace = os.readlink("/proc/self/ns/pid").strip("pid:[]")
        with open(f"/proc/{pid}/stat") as f:
            return f"{namespace}.{pid}.{f.read().rsplit(')', 1)[1].split()[19]}"
    except (OSError, IndexError):
        return None


def _sweep_scratch(root: Path) -> None:
    """Remove the scratch folders whose evaluating process is gone: one killed mid-evaluation (a
    worker its candidate killed, an orchestrator stopped with SIGKILL) never removed its own, and
    they hold the child's log and whatever the candidate wrote. Only folders of this PID namespace:
    whether the owner of another's lives cannot be told from here."""
    import re
    import shutil

    here = _owner(os.getpid())
    if here is None:
        return
    for folder in root.glob(SCRATCH + "*"):
        named = re.match(rf"{re.escape(SCRATCH)}(\d+)\.(\d+)\.(\d+)-", folder.name)
        if named and named[1] == here.split(".")[0] and _owner(int(named[2])) != ".".join(named.groups()):
            shutil.rmtree(folder, ignore_errors=True)


def _start(problem: Problem, solution: Solution, device: str, sandbox: str, root: Path,
           warm_cuda: bool = False) -> Started:
    _sweep_scratch(Path(tempfile.gettempdir()))
    owner = _owner(os.getpid())
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH}{owner}-" if owner else SCRATCH))
    bytecode_env, bytecode_folders = bytecode_for_child()
    warm = {WARM_IMPORTS: ",".join(solution.runtime_modules)}
    if warm_cuda and device == "cuda":
        warm[WARM_CUDA] = "1"
    timer_env, timer_files = _sealed_timer()
    plan_ = plan(sandbox, scratch=scratch, device=device,
                 extra_env={**child_env(device), **bytecode_env, **warm, **timer_env},
                 writable=[source_dir(solution.source_hash, root)],
                 readable=[solution.path, problem.reference, PACKAGE, *bytecode_folders, *timer_files])
    session = ChildSession(plan_, scratch, scratch / "child.log")
    return Started(_key(problem, solution, device, sandbox, root), session, scratch, plan_)


def _sealed_timer() -> tuple[dict[str, str], list[Path]]:
    """The sealed timer library, built here (a trusted process) and handed to the child read-only;
    without a C compiler there is none, and the child says so in its reply to the job."""
    from rooftop.integrity.seal import TIMER_ENV, SealError, library_path

    try:
        path = library_path()
    except (SealError, OSError):
        return {}, []
    return {TIMER_ENV: str(path)}, [path]


def prestart(problem: Problem, solution: Solution, device: str, sandbox: str, warm_cuda: bool = False) -> None:
    """Start the child an evaluation of this solution will ask for; unclaimed, it is stopped at exit.
    `warm_cuda`: it also makes its CUDA context before its hello (a GPU worker's next child)."""
    if not _registered:
        atexit.register(_stop_unclaimed)
        _registered.append(True)
    _ahead.append(_start(problem, solution, device, sandbox, cache_root(), warm_cuda))


def _stop_unclaimed() -> None:
    import shutil

    while _ahead:
        started = _ahead.pop()
        started.session.close()
        shutil.rmtree(started.scratch, ignore_errors=True)


def start_child(ev: Evaluation, build_only: bool = False) -> ChildSession:
    """A fresh child in a fresh scratch folder (removed when the evaluation closes), sandboxed as
    the settings say: one started ahead for this very evaluation when there is one. `build_only`:
    a child for the build stage, sandboxed as a CPU evaluation's (no GPU device, CUDA hidden)
    whatever device the job targets."""
    device = "cpu" if build_only else ev.device
    key = _key(ev.problem, ev.solution, device, ev.settings.sandbox, ev.job.cache_root)
    ahead = None if build_only else next((s for s in _ahead if s.key == key and s.session.proc.poll() is None), None)
    if ahead is not None:
        _ahead.remove(ahead)
    started = ahead or _start(ev.problem, ev.solution, device, ev.settings.sandbox, ev.job.cache_root)
    ev.setup.scratch = started.scratch
    ev.verdict.sandbox = started.sandbox.kind.value
    if started.sandbox.warning:
        ev.verdict.warnings.append(started.sandbox.warning)
    if started.session.unbounded:
        ev.verdict.warnings.append(f"[bounds] the candidate's host memory and processes were bounded by a watchdog "
                                   f"that looks ten times a second, not by the kernel: {started.session.unbounded}")
    return started.session
