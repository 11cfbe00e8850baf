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
from rooftop.pipeline.context import Evaluation
from rooftop.pipeline.job import WARM_CUDA, WARM_IMPORTS
from rooftop.pipeline.session import ChildSession
from rooftop.problem.spec import Problem
from rooftop.solution.loader import Solution

PACKAGE = Path(__file__).resolve().parents[1]


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


def _start(problem: Problem, solution: Solution, device: str, sandbox: str, root: Path,
           warm_cuda: bool = False) -> Started:
    scratch = Path(tempfile.mkdtemp(prefix="rooftop-eval-"))
    bytecode_env, bytecode_folders = bytecode_for_child()
    warm = {WARM_IMPORTS: ",".join(solution.runtime_modules)}
    if warm_cuda and device == "cuda":
        warm[WARM_CUDA] = "1"
    plan_ = plan(sandbox, scratch=scratch, device=device, extra_env={**child_env(device), **bytecode_env, **warm},
                 writable=[source_dir(solution.source_hash, root)],
                 readable=[solution.path, problem.reference, PACKAGE, *bytecode_folders])
    session = ChildSession(plan_, scratch, scratch / "child.log")
    return Started(_key(problem, solution, device, sandbox, root), session, scratch, plan_)


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
    assert ev.job is not None
    device = "cpu" if build_only else ev.device
    key = _key(ev.problem, ev.solution, device, ev.settings.sandbox, ev.job.cache_root)
    ahead = None if build_only else next((s for s in _ahead if s.key == key and s.session.proc.poll() is None), None)
    if ahead is not None:
        _ahead.remove(ahead)
    started = ahead or _start(ev.problem, ev.solution, device, ev.settings.sandbox, ev.job.cache_root)
    ev.scratch = started.scratch
    ev.verdict.sandbox = started.sandbox.kind.value
    if started.sandbox.warning:
        ev.verdict.warnings.append(started.sandbox.warning)
    return started.session
