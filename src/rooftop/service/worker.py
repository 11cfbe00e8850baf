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
from multiprocessing.connection import Connection
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from rooftop.pipeline.job import DeviceType, Settings
from rooftop.pipeline.prebuild import BuildTarget, Prebuilt
from rooftop.service.jobs import SourceSnapshot
from rooftop.verdict import Verdict

Role = Literal["device", "build"]


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
    from rooftop.integrity.sandbox import die_with_parent

    die_with_parent()
    os.environ.update(env)
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    target = describe_device(device) if role == "device" else None
    conn.send(Hello(target=target).model_dump_json())
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task = Task.model_validate_json(message)
        outcome = run_task(task, device, conn) if task.kind == "run" else build_task(task)
        if task.kind == "run":
            outcome.healthy = outcome.healthy and device_healthy(device)
        conn.send(outcome.model_dump_json())


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


def _load(task: Task) -> tuple[object, object]:
    from rooftop.api import check_once
    from rooftop.problem.registry import resolve
    from rooftop.service.jobs import problem_hash

    problem = resolve(task.problem)
    if problem_hash(problem) != task.problem_hash:
        from rooftop.errors import UserError

        raise UserError(f"problem '{task.problem}' changed after this job was queued; submit it again")
    check_once(problem)
    return problem, task.source.materialize()


def run_task(task: Task, device: DeviceType, conn: Connection) -> Outcome:
    from rooftop.errors import UserError
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.pipeline.events import Event, GateStarted

    def forward(event: Event) -> None:
        if isinstance(event, GateStarted):
            conn.send(Stage(job_id=task.job_id, stage=event.gate.value).model_dump_json())

    try:
        problem, solution = _load(task)
        settings = task.settings.model_copy(update={"device": device})
        verdict = evaluate(problem, solution, settings, events=forward)  # type: ignore[arg-type]
    except UserError as exc:
        return Outcome(job_id=task.job_id, error=str(exc))
    except Exception as exc:  # noqa: BLE001  (rooftop's own bug: the job fails, the worker is replaced)
        return Outcome(job_id=task.job_id, error=_bug(exc), healthy=False)
    verdict.solution = task.label
    return Outcome(job_id=task.job_id, verdict=verdict)


def build_task(task: Task) -> Outcome:
    from rooftop.errors import UserError
    from rooftop.pipeline.prebuild import prebuild

    assert task.target is not None
    try:
        problem, solution = _load(task)
        settings = task.settings.model_copy(update={"device": task.target.device})
        prebuilt = prebuild(problem, solution, settings, task.target)  # type: ignore[arg-type]
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
    return f"internal error in the worker: {type(exc).__name__}: {exc}\n" + "".join(frames[-3:])[-1500:]
