"""The gate runner: the one owner of an evaluation's order, deadlines and state.

It takes the gates in order, arms each one's deadline (per shape for the gates that go shape by
shape), sets the evaluation up (pipeline/trusted/setup.py) once, before the first gate that runs
the solution and under its deadline, hands each gate (each shape of it) a typed outcome to fill,
writes the outcomes into the verdict through `outcomes.assemble`, whether the gate passed or
failed, emits the events that report progress, and turns the one failure type, `GateFailed`, into
the verdict's status, failed gate and messages. The first failure stops the evaluation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from rooftop.errors import is_out_of_memory
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.gates import GATES, GateStep
from rooftop.pipeline.trusted.outcomes import GateOutcome, ShapeTimed, assemble
from rooftop.pipeline.trusted.setup import set_up
from rooftop.problem.spec import Shape
from rooftop.verdict import Gate, GateFailed, Status
from rooftop.vocabulary import DeviceWait, GateFinished, GateStarted, ShapeDone

T = TypeVar("T")


class GateRunner:
    def __init__(self, gates: tuple[GateStep, ...] = GATES,
                 setup: Callable[[Evaluation], None] = set_up) -> None:
        self.gates, self.setup, self.set = gates, setup, False

    def run(self, ev: Evaluation) -> None:
        """Every wanted gate in order; the verdict is `correct` when none failed."""
        for step in self.gates:
            if step.wanted(ev) and not self._run_gate(ev, step):
                return
        ev.verdict.status = Status.correct

    def _run_gate(self, ev: Evaluation, step: GateStep) -> bool:
        state = ev.state
        state.gate, state.shape, state.deadline, state.limit = step.gate, None, 0.0, 0.0
        shapes: list[Shape | None] = list(ev.shapes) if step.per_shape else [None]
        if step.holds_device and ev.device == "cuda":
            _take_device(ev)
        started = time.monotonic()

        def announce() -> None:  # once the first deadline is known (per-shape limits depend on the shape)
            state.emit(GateStarted(gate=step.gate, shapes=len(ev.shapes) if step.per_shape else 0,
                                   timeout=state.limit or None))

        outcomes: list[GateOutcome] = []
        try:
            for index, shape in enumerate(shapes, 1):
                shape_started = self._arm(ev, step, shape)
                if index == 1:
                    announce()
                if step.needs_setup and not self.set:
                    self.set = True
                    _guarded(self.setup, ev)
                outcomes.append(outcome := step.outcome(shape))
                _guarded(partial(step.run, outcome=outcome, shape=shape), ev)
                if shape is not None:
                    kept = outcome.candidate if isinstance(outcome, ShapeTimed) else None
                    state.emit(ShapeDone(gate=step.gate, shape=shape.name, index=index, of=len(shapes),
                                         seconds=time.monotonic() - shape_started,
                                         samples=kept.n if kept is not None else None))
        except GateFailed as failed:
            if state.deadline == 0.0:
                announce()
            status = self._fail(ev, failed, outcomes, time.monotonic() - started)
            state.emit(GateFinished(gate=step.gate, ok=False, seconds=time.monotonic() - started, status=status,
                                    detail=(ev.verdict.messages or [""])[0][:200]))
            return False
        finally:
            state.shape = None
        ev.phases[f"gate_{step.gate.value}"] = time.monotonic() - started
        record = assemble(ev.verdict, step.gate, outcomes, time.monotonic() - started)
        state.emit(GateFinished(gate=step.gate, ok=True, seconds=record.seconds if record else 0.0,
                                detail=record.detail if record else ""))
        return True

    @staticmethod
    def _arm(ev: Evaluation, step: GateStep, shape: Shape | None) -> float:
        """Set the deadline of the gate (or of one shape of it); the time it started."""
        state = ev.state
        state.shape = shape
        state.check_cancel()
        limit = step.timeout(ev, shape)
        state.limit = limit or 0.0
        state.deadline = time.monotonic() + limit if limit else math.inf
        return time.monotonic()

    @staticmethod
    def _fail(ev: Evaluation, failed: GateFailed, outcomes: list[GateOutcome], seconds: float) -> Status:
        """The failure in the verdict, with what the failing gate found before it failed."""
        gate, status = failed.resolved(ev.state.gate)
        messages = describe_failure(ev, gate, failed)
        verdict = ev.verdict
        verdict.status, verdict.failed_gate = status, gate
        verdict.messages.extend(messages)
        if failed.cached is not None:
            outcomes = outcomes or [GateOutcome(gate=gate)]
            outcomes[-1].cached = failed.cached
        assemble(verdict, gate, outcomes, seconds, failed=(messages or [""])[0])
        return status


def _take_device(ev: Evaluation) -> None:
    """Hold this evaluation's GPU before its first gate that uses it; the wait is no gate's time."""
    if ev.setup.lease is not None:
        return
    from rooftop.pipeline.trusted.device_lease import DeviceLease, gpu_identity

    lease = ev.setup.lease = DeviceLease(gpu_identity())
    waited = lease.acquire(check=ev.state.check_cancel,
                           on_wait=lambda holder: ev.state.emit(DeviceWait(device=lease.key, holder=holder)))
    if waited > 0.01:
        ev.phases["device_wait"] = waited


def _guarded(work: Callable[[Evaluation], T], ev: Evaluation) -> T:
    """A gate's work or the set-up; this process running out of memory is the harness's failure."""
    try:
        return work(ev)
    except GateFailed:
        raise
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise GateFailed(Status.internal_error, f"[memory] the trusted side ran out of memory: {message}") from exc


def describe_failure(ev: Evaluation, gate: Gate, failed: GateFailed) -> list[str]:
    """The verdict's messages for a failure; a lost child is worded with the gate and shape it was in."""
    where = ev.state.where
    if failed.lost == "timeout":
        return [f"the {gate.value} gate ran past its {ev.state.limit:.3g} s limit{where}; the child was killed"]
    if failed.lost == "protocol":
        return [f"[protocol] {failed.messages[0] if failed.messages else ''}{where}"]
    if failed.lost == "crash":
        how, tail = (failed.messages + ["", ""])[:2]
        return [f"the solution's process {how or 'stopped'} during the {gate.value} gate{where}"
                + (f"; its last output:\n{tail}" if tail else "")]
    return failed.messages
