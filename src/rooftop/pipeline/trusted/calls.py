"""Candidate calls as the trusted side makes them: a checked call alone (`call`), timed calls in
blocks queued back to back (`call_block`); each on a fresh secret seed, the reference run on the
same inputs here, the child's call there, and the checks every reply must pass. No input is ever
seen twice, and a candidate that tells a timed call from a checked one gains nothing by it: every
timed call's outputs are probed too, at positions drawn after it ran.

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
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.reference import Timed
from rooftop.pipeline.trusted.tracing import note_calls
from rooftop.pipeline.wire import BlockReply, BlockRequest, CallReply, CallRequest
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
    # whose queueing outlasts its spin is bound by its host (pipeline/trusted/timing.py flags the shape)
    reference_queue: tuple[float, float] = (0.0, 0.0)


def call(ev: Evaluation, shape: Shape, *, full: bool = False, audit: bool = False, seed: int | None = None) -> Called:
    """One checked call of the candidate on fresh inputs, with the reference's output on them
    (`full`: the whole outputs land in shared memory and the inputs are compared too). Its kernels
    are traced like every call's (pipeline/trusted/tracing.py)."""
    assert ev.setup.child is not None and ev.setup.reference is not None
    ev.state.check_cancel()
    checks = ev.settings.checks
    seed = ev.calls.seeds.next() if seed is None else seed
    inputs, expected = _reference(ev, shape, seed)
    landing = _landing(ev, expected) if full else None
    request = CallRequest(gate=ev.state.gate, shape=shape.name, seed=seed, full=full, audit=audit and checks,
                          check_inputs=full, probe=checks or full, reuse=not checks,
                          landing=landing.spec if landing else None, pool_sets=ev.setup.pool_sets.get(shape.name))
    reply, wall = ev.setup.child.request(request, CallReply, ev.state.deadline)
    ev.calls.last = time.monotonic()
    _check_reply(ev, shape, seed, reply, inputs if full else None, wall)
    spent(ev, "checked_calls", wall, reply)
    note_calls(ev, shape.name, [reply.seconds])
    return Called(reply, expected, inputs, None, wall, 0.0, None, None, seed)


def call_block(ev: Evaluation, shape: Shape, seeds: list[int | None], *, audit: bool = False,
               listed: int | None = None, reference: bool = True, candidate_first: bool = False) -> list[Called]:
    """Timed calls of the candidate on fresh inputs, queued back to back in one request (the
    child's `block`), beside the reference's calls on the same inputs, queued alike here
    (`run_block`: the same clock, a CUDA graph under --graphs): the reference's block first, or the
    candidate's when `candidate_first` (the timing gate alternates, so that neither side always
    runs on a GPU the other has just heated); without the reference when `reference` is False, and
    then nothing is expected yet (see `expect`). Call `listed` of the block has its kernels listed
    in full later (pipeline/trusted/tracing.py).

    Each call's wall time is the block's round trip shared evenly: the wall floor holds the
    block's untimed time, wherever in the block it was spent."""
    assert ev.setup.child is not None and ev.setup.reference is not None
    ev.state.check_cancel()
    checks, graph = ev.settings.checks, ev.settings.graphs
    drawn = [ev.calls.seeds.next() if seed is None else seed for seed in seeds]
    request = BlockRequest(calls=[
        CallRequest(gate=ev.state.gate, shape=shape.name, seed=seed, audit=audit and checks and not graph,
                    probe=checks, reuse=not checks, graph=graph, pool_sets=ev.setup.pool_sets.get(shape.name))
        for seed in drawn])
    if candidate_first:
        reply, wall, clock = _candidate_block(ev, request)
    timed: list[Timed | None] = [None] * len(drawn)
    reference_wall, reference_clock = 0.0, None
    if reference:
        started = time.perf_counter()
        timed = list(ev.setup.reference.run_block(shape, drawn, graph=graph, probe=checks,
                                                  pool_sets=ev.setup.pool_sets.get(shape.name)))
        reference_wall = time.perf_counter() - started
        ev.add_time("reference", reference_wall)
        reference_clock = _sm_clock(ev)
        ev.add_time("reference_spin", sum(one.hold for one in timed if one is not None))
    if not candidate_first:
        reply, wall, clock = _candidate_block(ev, request)
    share, reference_share = wall / len(drawn), reference_wall / len(drawn)
    called = []
    for seed, one, ref in zip(drawn, reply.calls, timed):
        _check_reply(ev, shape, seed, one, None, wall)
        spent(ev, "timed_calls", share, one)
        called.append(Called(one, ref.output if ref else None, [], ref.seconds if ref else None, share,
                             reference_share, reference_clock, clock, seed,
                             (ref.queued, ref.hold) if ref else (0.0, 0.0)))
    note_calls(ev, shape.name, [one.seconds for one in reply.calls], listed=listed)
    return called


def harness_costs(ev: Evaluation, shape: Shape, calls: int) -> list[float]:
    """What the harness itself costs per call on this shape, on the trusted clock: the round trips
    of no-op calls (inputs made, the clock's flush and spin, a call that returns its first input,
    the probes), less the clock's own time and spin. The wall floor (pipeline/trusted/timing.py) holds
    the candidate's calls to it."""
    assert ev.setup.child is not None
    checks = ev.settings.checks
    seed = ev.calls.seeds.next()
    costs = []
    for _ in range(calls):  # blocks of one call: a longer block shares its round trip, and costs less per call
        request = BlockRequest(calls=[CallRequest(gate=ev.state.gate, shape=shape.name, noop=True, probe=True,
                                                  seed=seed if not checks else ev.calls.seeds.next(), reuse=not checks,
                                                  pool_sets=ev.setup.pool_sets.get(shape.name))])
        block, wall = _request_block(ev, request)
        reply = block.calls[0]
        note_calls(ev, shape.name, [reply.seconds])
        costs.append(wall - float(reply.seconds or 0.0) - reply.hold)
    return costs


def _candidate_block(ev: Evaluation, request: BlockRequest) -> tuple[BlockReply, float, float | None]:
    """The child's block: its replies, its trusted wall time and the SM clock just after it."""
    reply, wall = _request_block(ev, request)
    ev.calls.last = time.monotonic()
    return reply, wall, _sm_clock(ev)


def _request_block(ev: Evaluation, request: BlockRequest) -> tuple[BlockReply, float]:
    """The child's replies to a block and the block's trusted wall time; a failure, or a reply
    count other than the block's, ends the gate."""
    assert ev.setup.child is not None
    reply, wall = ev.setup.child.request(request, BlockReply, ev.state.deadline)
    if reply.failure is not None:
        raise GateFailed(reply.failure.status, *reply.failure.messages)
    if len(reply.calls) != len(request.calls):
        raise GateFailed(Status.rejected, f"[protocol] the child answered {len(reply.calls)} calls of a block of "
                         f"{len(request.calls)}")
    return reply, wall


def expect(ev: Evaluation, shape: Shape, called: Called) -> Called:
    """A call made without the reference, with what it should have returned: its inputs made
    again from its seed and the reference run on them, untimed, after the reply came back."""
    inputs, expected = _reference(ev, shape, called.seed)
    return called._replace(expected=expected, inputs=inputs)


def _reference(ev: Evaluation, shape: Shape, seed: int) -> tuple[list[Any], Any]:
    """The inputs of this seed and the reference's output on them, untimed."""
    assert ev.setup.reference is not None
    made = time.perf_counter()
    inputs = ev.setup.reference.inputs(shape, seed)
    ev.add_time("inputs", time.perf_counter() - made)
    started = time.perf_counter()
    expected = ev.setup.reference.run(shape, inputs)
    if ev.setup.reference.changed_inputs:  # the reference wrote its inputs: the checks need them as made
        inputs = ev.setup.reference.inputs(shape, seed)
    ev.add_time("reference", time.perf_counter() - started)
    return inputs, expected


def _landing(ev: Evaluation, expected: Any) -> Landing | None:
    """Shared memory with a region per expected output (kept while the sizes stay the same); a new
    one's descriptor goes to the child before the request that names it."""
    assert ev.setup.child is not None and ev.setup.reference is not None
    values = as_outputs(expected)
    if not all(type(v) is torch.Tensor for v in values):
        return None
    sizes = [nbytes(v) for v in values]
    if ev.setup.landing is not None and ev.setup.landing.fits(sizes):
        return ev.setup.landing
    if ev.setup.landing is not None:
        ev.setup.landing.close()
        ev.setup.landing = None
    try:
        ev.setup.landing = Landing(sizes, ev.setup.reference.device)
        fd = ev.setup.landing.export()
    except (LandingError, RuntimeError, OSError) as exc:
        raise GateFailed(Status.internal_error, f"[harness] {exc}")
    try:
        ev.setup.child.send_descriptor(fd)
    finally:
        os.close(fd)
    return ev.setup.landing


def _check_reply(ev: Evaluation, shape: Shape, seed: int, reply: CallReply, inputs: list | None, wall: float) -> None:
    """What every reply must pass before its figures mean anything."""
    if reply.failure is not None:
        raise GateFailed(reply.failure.status, *reply.failure.messages)
    if reply.findings:
        raise GateFailed(Status.rejected, *reply.findings)
    wrong_inputs = same_inputs(inputs, reply.inputs) if inputs is not None else ""
    if inputs is not None and not wrong_inputs:
        ev.calls.inputs_checked += 1
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
    assert ev.setup.reference is not None
    clock = ev.setup.reference.clock
    queued, hold = float(getattr(clock, "last_queued", 0.0)), float(getattr(clock, "last_hold", 0.0))
    if hold > 0.0:
        ev.add_time("reference_spin", hold)
    return queued, hold


def _sm_clock(ev: Evaluation) -> float | None:
    if ev.setup.sm_clock is None:
        return None
    started = time.perf_counter()
    mhz = ev.setup.sm_clock.read()
    ev.add_time("sm_clock_reads", time.perf_counter() - started)
    return mhz
