"""One candidate call as the trusted side makes it, whatever it is for (a full check, a warm-up,
a timed sample): a fresh secret seed, the reference run on the same inputs here, the
child's call there, and the checks every reply must pass. A candidate cannot tell a checked call
from a timed one, and no input is ever seen twice.

A timed call may leave the reference out (the timing gate stops timing it once its own samples
suffice); its output is then checked afterwards or not at all, as `expect` decides, from the seed
the call keeps."""

from __future__ import annotations

import os
import time
from typing import Any, NamedTuple

import torch

from rooftop.check.compare import as_outputs
from rooftop.check.landing import Landing, LandingError
from rooftop.check.probe import same_inputs
from rooftop.pipeline.context import Evaluation
from rooftop.pipeline.protocol import CallReply, CallRequest
from rooftop.pipeline.tracing import note_call
from rooftop.problem.spec import Shape
from rooftop.values import nbytes
from rooftop.verdict import GateFailed, Status


class Called(NamedTuple):
    """One candidate call as the trusted side saw it."""

    reply: CallReply
    expected: Any
    inputs: list
    reference_seconds: float | None
    wall: float  # trusted wall time of the child's round trip
    reference_wall: float  # trusted wall time of the reference run
    reference_clock: float | None  # SM clock (MHz) just after the reference ran
    clock: float | None  # SM clock just after the candidate's call
    seed: int  # the inputs' seed: the same inputs can be made again
    # seconds the host took to queue the reference's work, and the spin before it: a timed reference
    # whose queueing outlasts its spin is bound by its host (pipeline/timing.py flags the shape)
    reference_queue: tuple[float, float] = (0.0, 0.0)


def call(ev: Evaluation, shape: Shape, *, full: bool = False, audit: bool = False, listed: bool = False,
         timed: bool = False, seed: int | None = None, reference: bool = True) -> Called:
    """One call of the candidate on fresh inputs (timed: with the reference timed before it on the
    same inputs, both in a CUDA graph under --graphs; without it when `reference` is False, and
    then nothing is expected yet: see `expect`). Its kernels are traced like every call's, and
    listed in full later when `listed` (pipeline/tracing.py)."""
    assert ev.session is not None and ev.trusted is not None
    assert reference or (timed and not full)
    ev.state.check_cancel()
    checks, graphs = ev.settings.checks, ev.settings.graphs
    seed = ev.seeds.next() if seed is None else seed
    graph = timed and graphs
    inputs: list[Any] = []
    expected, reference_seconds, reference_wall, reference_clock = None, None, 0.0, None
    queue = (0.0, 0.0)
    if reference:
        inputs, expected, reference_seconds, reference_wall = _reference(ev, shape, seed, timed=timed, graph=graph)
        reference_clock = _sm_clock(ev) if timed else None
        queue = _queue(ev) if timed else queue
    landing = _landing(ev, expected) if full else None
    request = CallRequest(gate=ev.state.gate, shape=shape.name, seed=seed, full=full,
                          audit=audit and checks and not graph, check_inputs=full, probe=checks or full,
                          reuse=not checks, graph=graph, landing=landing.spec if landing else None,
                          pool_sets=ev.pool_sets.get(shape.name))
    reply, wall = ev.session.request(request, CallReply, ev.state.deadline)
    ev.last_call = time.monotonic()
    clock = _sm_clock(ev) if timed else None
    _check_reply(ev, shape, seed, reply, inputs if full else None, wall)
    spent(ev, "timed_calls" if timed else "checked_calls", wall, reply)
    note_call(ev, shape.name, reply.seconds, listed=listed)
    return Called(reply, expected, inputs, reference_seconds, wall, reference_wall, reference_clock, clock, seed, queue)


def harness_costs(ev: Evaluation, shape: Shape, calls: int) -> list[float]:
    """What the harness itself costs per call on this shape, on the trusted clock: the round trips
    of no-op calls (inputs made, the clock's flush and spin, a call that returns its first input,
    the probes), less the clock's own time and spin. The wall floor (pipeline/timing.py) holds
    the candidate's calls to it."""
    assert ev.session is not None
    checks = ev.settings.checks
    seed = ev.seeds.next()
    costs = []
    for _ in range(calls):
        request = CallRequest(gate=ev.state.gate, shape=shape.name, seed=seed if not checks else ev.seeds.next(),
                              noop=True, probe=True, reuse=not checks, pool_sets=ev.pool_sets.get(shape.name))
        reply, wall = ev.session.request(request, CallReply, ev.state.deadline)
        if reply.failure is not None:
            raise GateFailed(reply.failure.status, *reply.failure.messages)
        note_call(ev, shape.name, reply.seconds)
        costs.append(wall - float(reply.seconds or 0.0) - reply.hold)
    return costs


def expect(ev: Evaluation, shape: Shape, called: Called) -> Called:
    """A call made without the reference, with what it should have returned: its inputs made
    again from its seed and the reference run on them, untimed, after the reply came back."""
    inputs, expected, _, _ = _reference(ev, shape, called.seed, timed=False, graph=False)
    return called._replace(expected=expected, inputs=inputs)


def _reference(ev: Evaluation, shape: Shape, seed: int, *, timed: bool,
               graph: bool) -> tuple[list[Any], Any, float | None, float]:
    """The inputs of this seed and the reference's output on them (and its time, when timed)."""
    assert ev.trusted is not None
    made = time.perf_counter()
    inputs = ev.trusted.inputs(shape, seed, timed=timed)
    ev.add_time("inputs", time.perf_counter() - made)
    started = time.perf_counter()
    expected, seconds = ev.trusted.run(shape, inputs, timed=timed, graph=graph, pool_sets=ev.pool_sets.get(shape.name))
    wall = time.perf_counter() - started
    if ev.trusted.changed_inputs:  # the reference wrote its inputs: the checks need them as made
        inputs = ev.trusted.inputs(shape, seed)
    ev.add_time("reference", wall)
    return inputs, expected, seconds, wall


def _landing(ev: Evaluation, expected: Any) -> Landing | None:
    """Shared memory with a region per expected output (kept while the sizes stay the same); a new
    one's descriptor goes to the child before the request that names it."""
    assert ev.session is not None and ev.trusted is not None
    values = as_outputs(expected)
    if not all(type(v) is torch.Tensor for v in values):
        return None
    sizes = [nbytes(v) for v in values]
    if ev.landing is not None and ev.landing.fits(sizes):
        return ev.landing
    if ev.landing is not None:
        ev.landing.close()
        ev.landing = None
    try:
        ev.landing = Landing(sizes, ev.trusted.device)
        fd = ev.landing.export()
    except (LandingError, RuntimeError, OSError) as exc:
        raise GateFailed(Status.internal_error, f"[harness] {exc}")
    try:
        ev.session.send_descriptor(fd)
    finally:
        os.close(fd)
    return ev.landing


def _check_reply(ev: Evaluation, shape: Shape, seed: int, reply: CallReply, inputs: list | None, wall: float) -> None:
    """What every reply must pass before its figures mean anything."""
    if reply.failure is not None:
        raise GateFailed(reply.failure.status, *reply.failure.messages)
    if reply.findings:
        raise GateFailed(Status.rejected, *reply.findings)
    wrong_inputs = same_inputs(inputs, reply.inputs) if inputs is not None else ""
    if inputs is not None and not wrong_inputs:
        ev.inputs_checked += 1
    if wrong_inputs:
        raise GateFailed(Status.rejected, f"[inputs] shape '{shape.name}', seed {seed}: the inputs the child made "
                         f"differ from the trusted side's ({wrong_inputs}); get_inputs was altered in the child or "
                         "does not reproduce across processes")
    if reply.seconds is not None and not (0 < reply.seconds <= wall):
        raise GateFailed(Status.rejected, f"[protocol] the child reported {reply.seconds:.3g} s for a call that "
                         f"took {wall:.3g} s of trusted wall time")


def spent(ev: Evaluation, kind: str, wall: float, reply: CallReply) -> None:
    """Where a call's round trip went, summed into the verdict's phases: the round trips of each
    kind, and in them the child's own steps (its word: where the time went, never a figure judged)."""
    ev.add_time(f"{kind}_round_trip", wall)
    for step, seconds in reply.spent.items():
        if 0.0 <= seconds <= wall:
            ev.add_time(f"{kind}_child_{step}", seconds)
    if 0.0 < reply.hold <= wall:
        ev.add_time(f"{kind}_child_clock_spin", reply.hold)


def _queue(ev: Evaluation) -> tuple[float, float]:
    """The trusted clock's last timed call: its host's seconds to queue the work, and the spin before it."""
    assert ev.trusted is not None
    clock = ev.trusted.clock
    queued, hold = float(getattr(clock, "last_queued", 0.0)), float(getattr(clock, "last_hold", 0.0))
    if hold > 0.0:
        ev.add_time("reference_spin", hold)
    return queued, hold


def _sm_clock(ev: Evaluation) -> float | None:
    if ev.sm_clock is None:
        return None
    started = time.perf_counter()
    mhz = ev.sm_clock.read()
    ev.add_time("sm_clock_reads", time.perf_counter() - started)
    return mhz
