"""The two kinds of worker process and the messages between them and the orchestrator.

A device worker owns one device: it is the trusted side of every evaluation there (its process,
torch and CUDA context live from one job to the next), and it runs one evaluation at a time, so
two timings never share a GPU. Each candidate still runs in a fresh child of its own. A build
worker runs the build stage (pipeline/prebuild.py) on CPU cores set apart from the device
workers'. Workers never touch the store: they get a task and answer with its outcome, and the
orchestrator records it. A worker dies with the orchestrator (and its children with it).
"""

from __future__ import annotations

import os
import traceback
from collections import deque
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from rooftop.pipeline.prebuild import BuildTarget, Prebuilt
from rooftop.problem.spec import Problem
from rooftop.service.jobs import SourceSnapshot
from rooftop.solution.loader import Solution
from rooftop.verdict import Verdict
from rooftop.vocabulary import DeviceType, EventSink, Settings

Role = Literal["device", "build"]
AHEAD = 3  # children a GPU worker starts ahead of need (for the jobs it holds after the current one)
BUG = "internal error in the worker: "  # how the error of a job failed by rooftop's own bug begins


def jobs_held(device: DeviceType) -> int:
    """Jobs a device worker is handed at once: on a GPU the current one and AHEAD more, whose
    children it starts during the current one (a child's interpreter, torch and CUDA context take
    longer than a small problem's verdict); not on a CPU, where a child's start would take cycles
    from a timing."""
    return 1 + AHEAD if device == "cuda" else 1


class Task(BaseModel):
    """Evaluate (device worker) or build (build worker) one job."""

    kind: Literal["run", "build"]
    job_id: str
    problem: str
    problem_hash: str
    source: SourceSnapshot
    settings: Settings
    label: str
    target: BuildTarget | None = None  # build tasks: the device the build is for


class Hello(BaseModel):
    kind: Literal["hello"] = "hello"
    target: BuildTarget | None = None  # device workers: their device, as builds must target it


class Stage(BaseModel):
    """Progress within a task: the gate it has reached."""

    kind: Literal["stage"] = "stage"
    job_id: str
    stage: str


class Outcome(BaseModel):
    kind: Literal["outcome"] = "outcome"
    job_id: str
    verdict: Verdict | None = None  # a final verdict (from a device, or a build stage that settled it)
    prebuilt: Prebuilt | None = None  # build tasks without a final verdict
    error: str | None = None  # no verdict could be made: why (the job fails)
    healthy: bool = True  # False: this worker should be replaced before its next task


MESSAGES: TypeAdapter[Hello | Stage | Outcome] = TypeAdapter(
    Annotated[Hello | Stage | Outcome, Field(discriminator="kind")])


def worker_main(conn: Connection, role: Role, device: DeviceType, env: dict[str, str], cores: list[int]) -> None:
    """A worker's life: set up, greet, then one task at a time until told to stop (None) or the
    orchestrator is gone."""
    from rooftop.integrity.environ import undumpable, withdraw_secrets
    from rooftop.integrity.sandbox import die_with_parent

    die_with_parent()
    undumpable()  # a candidate run without a sandbox cannot read this worker's memory or trace it
    os.environ.update(env)
    withdraw_secrets()  # model API keys and tokens are no business of a worker
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    target = describe_device(device) if role == "device" else None
    conn.send(Hello(target=target).model_dump_json())
    inbox = Inbox(conn)
    while True:
        try:
            task = inbox.next()
        except (EOFError, OSError):
            return
        if task is None:
            return
        if task.kind == "build":
            outcome = build_task(task)
        else:
            outcome = run_task(task, device, conn, inbox)
            outcome.healthy = outcome.healthy and device_healthy(device)
        conn.send(outcome.model_dump_json())


class Inbox:
    """The tasks a worker has been handed and not begun (the orchestrator may hand one over ahead);
    without a connection, only those it was given (a Ray actor is told them with its task)."""

    def __init__(self, conn: Connection | None, pending: list[Task] | None = None,
                 started_ahead: set[str] | None = None) -> None:
        self.conn, self.pending, self.stopping = conn, deque[Task](pending or []), False
        # jobs whose children were started ahead of need
        self.started_ahead: set[str] = set() if started_ahead is None else started_ahead

    def drain(self) -> None:
        """Take in what has arrived, without waiting."""
        while self.conn is not None and not self.stopping and self.conn.poll(0):
            self._take(self.conn.recv())

    def next(self) -> Task | None:
        """The next task, waiting for one; None once told to stop and nothing is left."""
        self.drain()
        if not self.pending and not self.stopping and self.conn is not None:
            self._take(self.conn.recv())
        return self.pending.popleft() if self.pending else None

    def _take(self, message: str | None) -> None:
        if message is None:
            self.stopping = True
        else:
            self.pending.append(Task.model_validate_json(message))


def describe_device(device: DeviceType) -> BuildTarget:
    from rooftop.environment import collect_environment

    capability = None
    if device == "cuda":
        import torch

        torch.empty(1, device="cuda")  # the trusted side's CUDA context, made once for all its jobs
        capability = torch.cuda.get_device_capability()
    return BuildTarget(device=device, environment=collect_environment(device), capability=capability)


def device_healthy(device: DeviceType) -> bool:
    """Whether this process's own device context still works (a sticky CUDA error ends it)."""
    if device != "cuda":
        return True
    try:
        import torch

        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001  (any failure here means: replace this worker)
        return False


def _load(task: Task, problems: Mapping[str, Problem] | None = None) -> tuple[Problem, Solution]:
    """The task's problem (from `problems`, by problem hash, where the caller holds it in memory;
    else resolved by name) and its solution."""
    from rooftop.api import check_once
    from rooftop.problem.registry import resolve
    from rooftop.service.jobs import problem_hash

    problem = (problems or {}).get(task.problem_hash) or resolve(task.problem)
    if problem_hash(problem) != task.problem_hash:
        from rooftop.errors import UserError

        raise UserError(f"problem '{task.problem}' changed after this job was queued; submit it again")
    check_once(problem)
    return problem, task.source.materialize()


def run_task(task: Task, device: DeviceType, conn: Connection | None = None, inbox: Inbox | None = None,
             events: EventSink | None = None, problems: Mapping[str, Problem] | None = None) -> Outcome:
    """Evaluate one job here. On a GPU, the children of the next jobs this worker holds are started
    while this one is in its early gates (never once it times): their interpreters, torch and CUDA
    contexts come up during this evaluation rather than after its verdict. `events` sees every
    event of the evaluation (an in-process caller's display); `problems` as for `_load`."""
    from rooftop.errors import UserError
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.verdict import Gate
    from rooftop.vocabulary import Event, GateStarted, ShapeDone

    def forward(event: Event) -> None:
        early = isinstance(event, GateStarted | ShapeDone) and event.gate in (Gate.build, Gate.load, Gate.correctness)
        if early and inbox is not None and device == "cuda":
            inbox.drain()
            for waiting in list(inbox.pending)[:AHEAD]:
                if waiting.job_id not in inbox.started_ahead:
                    inbox.started_ahead.add(waiting.job_id)
                    _start_ahead(waiting, device, problems)
        if events is not None:
            events(event)
        if isinstance(event, GateStarted) and conn is not None:
            conn.send(Stage(job_id=task.job_id, stage=event.gate.value).model_dump_json())

    try:
        problem, solution = _load(task, problems)
        settings = task.settings.model_copy(update={"device": device})
        verdict = evaluate(problem, solution, settings, events=forward)
    except UserError as exc:
        return Outcome(job_id=task.job_id, error=str(exc))
    except Exception as exc:  # noqa: BLE001  (rooftop's own bug: the job fails, the worker is replaced)
        return Outcome(job_id=task.job_id, error=_bug(exc), healthy=False)
    verdict.solution = task.label
    return Outcome(job_id=task.job_id, verdict=verdict)


def _start_ahead(task: Task, device: DeviceType, problems: Mapping[str, Problem] | None = None) -> None:
    from rooftop.pipeline.trusted.spawn import prestart

    try:
        problem, solution = _load(task, problems)
        prestart(problem, solution, device, task.settings.sandbox.value, warm_cuda=True)
    except Exception:  # noqa: BLE001  (its own evaluation will say what is wrong, in its own words)
        pass


def build_task(task: Task) -> Outcome:
    from rooftop.errors import UserError
    from rooftop.pipeline.prebuild import prebuild

    assert task.target is not None
    try:
        problem, solution = _load(task)
        settings = task.settings.model_copy(update={"device": task.target.device})
        prebuilt = prebuild(problem, solution, settings, task.target)
    except UserError as exc:
        return Outcome(job_id=task.job_id, error=str(exc))
    except Exception as exc:  # noqa: BLE001
        return Outcome(job_id=task.job_id, error=_bug(exc), healthy=False)
    if prebuilt.verdict is not None:
        prebuilt.verdict.solution = task.label
        return Outcome(job_id=task.job_id, verdict=prebuilt.verdict, prebuilt=prebuilt.model_copy(
            update={"verdict": None}))
    return Outcome(job_id=task.job_id, prebuilt=prebuilt)


def _bug(exc: BaseException) -> str:
    frames = traceback.format_exception(exc)
    return f"{BUG}{type(exc).__name__}: {exc}\n" + "".join(frames[-3:])[-1500:]
