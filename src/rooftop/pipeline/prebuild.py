"""The build stage on its own, for a build pool that keeps compilers off the GPU machines' timing.

`prebuild` runs the static gate and the build gate in a sandboxed child that sees no GPU and
builds for the target GPU's architecture, into the same build folder an evaluation on that GPU
uses (pipeline/child/build.py keys it by source and platform). The evaluation that follows then
finds everything built. A failure is final only where the evaluation on the device would fail
the same way: a static refusal, a compile error, a build that hangs, or (for a CPU target) code
that needs a GPU. Anything else that goes wrong here (module-level code that wants a GPU, say)
proves nothing about the candidate, and the device decides.
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from rooftop.environment import mode_for
from rooftop.pipeline.evaluate import finish, prepare, select_shapes
from rooftop.pipeline.trusted.gates import BuildGate, StaticGate
from rooftop.pipeline.trusted.runner import GateRunner
from rooftop.pipeline.trusted.setup import set_up_build_only
from rooftop.problem.spec import Problem
from rooftop.solution.loader import Solution, needs_build
from rooftop.verdict import Environment, Gate, Status, Verdict
from rooftop.vocabulary import DeviceType, Settings, ignore

# build-gate statuses the device would give too
FINAL_BUILD = {Status.compile_error, Status.timeout, Status.needs_gpu}


class BuildTarget(BaseModel):
    """The device an evaluation will run on, as its worker described it."""

    device: DeviceType
    environment: Environment
    capability: tuple[int, int] | None = None


class Prebuilt(BaseModel):
    """What the build stage found: a final verdict, or what was built (and whether it was cached)."""

    verdict: Verdict | None = None
    compiled: bool = False  # a compiler ran or was found in the cache
    seconds: float = 0.0
    cached: bool | None = None
    note: str | None = None  # why a failure here was left to the device


class CompileGate(BuildGate):
    """The build gate of a child that only builds: it needs no GPU (set_up_build_only starts it)."""

    holds_device = False


def prebuild(problem: Problem, solution: Solution, settings: Settings, target: BuildTarget) -> Prebuilt:
    started = time.monotonic()
    which, shapes = select_shapes(problem, settings.shapes, target.device)
    ev = prepare(problem, solution, settings, target.device, which, shapes, ignore, None)
    ev.job = ev.job.model_copy(update={"capability": target.capability, "build_only": True})
    ev.verdict.environment = target.environment.model_copy(update={"mode": mode_for(target.device, solution)})
    gates = (StaticGate(), CompileGate()) if needs_build(solution.languages) else (StaticGate(),)
    try:
        GateRunner(gates, setup=set_up_build_only).run(ev)
    finally:
        ev.close()
    verdict = ev.verdict
    record = next((g for g in verdict.gates if g.gate is Gate.build), None)
    built = Prebuilt(compiled=record is not None, seconds=record.seconds if record else 0.0,
                     cached=record.cached if record else None)
    if verdict.failed_gate is None:
        return built
    if verdict.failed_gate is Gate.static or verdict.status in FINAL_BUILD:
        return built.model_copy(update={"verdict": finish(ev, started)})
    return Prebuilt(note=f"{verdict.status.value}: {' '.join(verdict.messages)[:300]}")
