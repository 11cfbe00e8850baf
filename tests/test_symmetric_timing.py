"""The reference's timed calls carry what the candidate's carry: the same compiled timer and, with
the checks on, the same kernel tracer (CUPTI's kernel records cost memory-bound kernels up to 5 %
of their time on an H200, which a reference timed without them was spared). CPU-only: the parts
that decide which side is traced, and the switch the trusted copy of the timer turns."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace
from typing import Any

import pytest

from rooftop.integrity import seal
from rooftop.measure.timer import CudaEventClock
from rooftop.pipeline.trusted.reference import TrustedReference
from rooftop.pipeline.trusted.setup import trace_reference
from rooftop.problem.registry import resolve


class FakeTimer:
    """The compiled timer's entry points, noting what the clock asked of them."""

    cuda = True
    tracing = True

    def __init__(self) -> None:
        self.steps: list[Any] = []

    def record(self, on: bool) -> None:
        self.steps.append(("record", on))

    def cuda_hold(self, stream: int, hold_cycles: int) -> None:
        self.steps.append("hold")

    def cuda_begin(self, stream: int, slot: int) -> None:
        self.steps.append("begin")

    def cuda_end(self, stream: int, slot: int) -> None:
        self.steps.append("end")

    def cuda_elapsed(self, slot: int) -> float:
        self.steps.append("elapsed")
        return 1e-3


def _clock(timer: FakeTimer, traced: bool | None) -> CudaEventClock:
    """A CUDA event clock over `timer`, without a GPU: only what `time` reads."""
    clock = CudaEventClock.__new__(CudaEventClock)
    stream = SimpleNamespace(cuda_stream=7)
    clock._torch = SimpleNamespace(cuda=SimpleNamespace(current_stream=lambda: stream))
    clock._sealed, clock._traced = timer, traced
    clock._cycles_per_second, clock._hold_cycles = 1e9, 200_000
    clock._queueing = deque(maxlen=CudaEventClock.HOLD_WINDOW)
    clock._queued = 0
    return clock


@pytest.mark.parametrize("traced", [True, False])
def test_a_trusted_clock_sets_the_tracer_to_its_side_before_every_timed_call(traced):
    timer = FakeTimer()
    clock = _clock(timer, traced)
    calls: list[str] = []
    assert clock.time(lambda: calls.append("call")) == 1e-3
    clock.time(lambda: calls.append("call"))
    assert timer.steps == [("record", traced), "hold", "begin", "end", "elapsed"] * 2 and calls == ["call", "call"]


def test_the_sealed_clock_of_the_child_never_touches_its_tracer():
    timer = FakeTimer()
    _clock(timer, None).time(lambda: None)
    assert timer.steps == ["hold", "begin", "end", "elapsed"]


def test_a_call_s_inputs_are_made_after_its_spin_and_before_its_flush():
    """Work on another stream that the spin hides must not find the inputs made: a candidate that
    switched the kernel tracer off could otherwise compute its outputs there, before the window."""
    timer = FakeTimer()
    clock = _clock(timer, None)
    clock.queue(lambda: timer.steps.append("call"), lambda: timer.steps.append("inputs"))
    clock.queue(lambda: timer.steps.append("call"), lambda: timer.steps.append("inputs"))
    assert clock.collect() == [1e-3, 1e-3]
    assert timer.steps == ["hold", "inputs", "begin", "call", "end"] * 2 + ["elapsed"] * 2


def _ev(checks: bool) -> Any:
    reference = SimpleNamespace(traced=False, device="cuda:0")
    return SimpleNamespace(setup=SimpleNamespace(reference=reference), settings=SimpleNamespace(checks=checks),
                          verdict=SimpleNamespace(warnings=[]))


@pytest.mark.parametrize("checks, child_untraced, traced", [
    (True, "", True),
    (True, "no CUPTI library (libcupti) was found", False),
    (False, "the job asked for no tracing", False),
])
def test_the_reference_is_traced_exactly_when_the_candidate_is(monkeypatch, checks, child_untraced, traced):
    monkeypatch.setattr("rooftop.measure.timer.native_timer", lambda device: (FakeTimer(), ""))
    ev = _ev(checks)
    trace_reference(ev, traced=checks and not child_untraced)
    assert ev.setup.reference.traced is traced
    assert ev.verdict.warnings == []


def test_a_reference_that_cannot_carry_the_tracer_the_candidate_carries_is_said_to_lean(monkeypatch):
    monkeypatch.setattr("rooftop.measure.timer.native_timer",
                        lambda device: (None, "building the sealed timer failed: no cc"))
    ev = _ev(True)
    trace_reference(ev, traced=True)
    assert len(ev.verdict.warnings) == 1
    warning = ev.verdict.warnings[0]
    assert warning.startswith("[trace]") and "no cc" in warning and "against the candidate" in warning


def test_an_evaluation_child_never_loads_a_trusted_copy_of_the_timer(monkeypatch):
    monkeypatch.setattr(seal, "_in_child", True)
    monkeypatch.setattr(seal, "_trusted", None)
    timer, why = seal.trusted_timer(0)
    assert timer is None and "evaluation child" in why
    assert seal._trusted is None  # nothing was loaded


def test_the_trusted_copy_is_held_to_the_device_it_was_set_up_on(monkeypatch):
    timer = FakeTimer()
    monkeypatch.setattr(seal, "_in_child", False)
    monkeypatch.setattr(seal, "_trusted", (0, timer, ""))
    assert seal.trusted_timer(0) == (timer, "")
    other, why = seal.trusted_timer(1)
    assert other is None and "device 0, not 1" in why


def test_the_tracer_switch_refuses_without_an_attached_tracer():
    try:
        timer = seal.SealedTimer(seal.library_path())
    except seal.SealError as exc:
        pytest.skip(str(exc))
    timer.record(False)  # already off: nothing asked of the library
    with pytest.raises(RuntimeError, match="kernel records on failed"):
        timer.record(True)
    assert timer.lib.rt_trace_enable(0) == -1


def test_changing_the_reference_s_tracing_drops_its_clock():
    trusted = TrustedReference(resolve("examples/softmax"), "cpu", 0)
    try:
        first = trusted.clock
        assert trusted.clock is first
        trusted.traced = True
        assert trusted.traced and trusted.clock is not first
    finally:
        trusted.release()


def test_the_clock_keeps_the_host_s_time_to_queue_its_last_call():
    clock = _clock(FakeTimer(), None)
    clock.last_hold = clock.last_queued = 0.0
    clock.time(lambda: None)
    assert clock.last_hold == pytest.approx(200e-6)  # the spin it was given
    assert 0.0 <= clock.last_queued < 0.1


def test_a_side_whose_host_outlasts_its_spin_on_most_calls_is_named_host_bound():
    from rooftop.pipeline.trusted.timing import host_bound

    steady = [-150e-6] * 20  # queued well within the spin every time
    assert host_bound({"candidate": steady, "reference": steady}) == ""
    launch_bound = [1.2e-3] * 15 + [-1e-5] * 5  # 2,000 launches outlast even the longest spin
    found = host_bound({"candidate": steady, "reference": launch_bound})
    assert "reference" in found and "candidate" not in found and "15 of 20" in found and "1200 us" in found
    assert host_bound({"candidate": [1e-4] * 3 + [-1e-4] * 7}) == ""  # a few late calls are not the shape's rule
    assert host_bound({"candidate": [], "reference": []}) == ""


def test_the_host_bound_warning_gives_each_side_s_time_to_queue_a_call():
    """Which side's host is the slower launcher is what a host-bound speedup turns on: the verdict
    keeps both medians, and the warning says them."""
    from rooftop.batch.selfcheck import judge
    from rooftop.measure.measurement import TimingStats
    from rooftop.pipeline.trusted.outcomes import ShapeTimed, assemble
    from rooftop.pipeline.trusted.timing import cross_check
    from rooftop.problem.spec import Shape
    from rooftop.verdict import Gate, ShapeResult, Status, Verdict

    stats = TimingStats(clock="cuda_event", samples=[1e-3] * 20)
    timed = ShapeTimed(gate=Gate.timing, shape="s", candidate=stats, reference=stats,
                       queue_seconds={"candidate": 2.1e-3, "reference": 3.4e-3})
    sampling = SimpleNamespace(samplers=[SimpleNamespace(many_dropped=False)])
    cross_check(SimpleNamespace(), Shape(name="s", params={}), timed, sampling,
                {"candidate": [-1e-4] * 20, "reference": [1e-3] * 20})
    assert timed.flags == ["host-bound"]
    assert "(median host time to queue a call: candidate 2.10 ms, reference 3.40 ms)" in timed.warnings[0]
    quiet = timed.model_copy(update={"flags": [], "warnings": []})
    cross_check(SimpleNamespace(), Shape(name="s", params={}), quiet, sampling, {"candidate": [-1e-4] * 20})
    assert quiet.flags == [] and quiet.warnings == []  # queue times alone flag nothing
    verdict = Verdict(status=Status.correct, reward=None, problem="p", problem_version=1, solution="s.py",
                      source_hash="h", shapes=[ShapeResult(shape="s", split="visible", params={}, correct=True)])
    assemble(verdict, Gate.timing, [timed], 0.5)
    assert verdict.shapes[0].flags == ["host-bound"] and verdict.warnings == timed.warnings
    assert judge("p", verdict, "cuda").shapes[0].queued == {"candidate": 2.1e-3, "reference": 3.4e-3}


@pytest.mark.parametrize("graph", [False, True])
def test_a_call_reports_its_spin_whether_replayed_from_a_graph_or_not(graph):
    """The trusted wall floor takes each call's spin off its round trip; a graph replay that left it
    out (up to 2 ms for a graph of thousands of launches) had honest self-checks rejected."""
    import torch

    from rooftop.integrity.audit import Audit
    from rooftop.pipeline.child.call import CallRunner
    from rooftop.pipeline.wire import CallReply, CallRequest

    class Clock:
        last_hold, last_queued = 2e-3, 2.5e-3

        def time(self, call, inputs):
            inputs()
            call()
            return 9e-3

    out = torch.ones(3)
    replayed = SimpleNamespace(static=[out], outputs=out, replay=lambda: None)
    runner = CallRunner.__new__(CallRunner)
    runner.device, runner.clock = SimpleNamespace(type="cuda"), Clock()
    runner._graphed = lambda shape, model, inputs: replayed
    runner.graphs = SimpleNamespace(holds=lambda shape: True)
    reply = CallReply()
    request = CallRequest(gate="timing", shape="s", seed=1, graph=graph)
    result, _ = runner._run(request, "s", lambda x: x * 2, lambda: [out], Audit(count_compute=False), reply)
    assert reply.seconds == 9e-3 and reply.hold == 2e-3 and reply.queued == 2.5e-3
    assert torch.equal(result, out if graph else out * 2)


def test_replies_carry_nan_and_infinities_across_the_channel(tmp_path):
    """A candidate's outputs may hold NaN and infinities: the probes (and every float of a reply)
    reach the trusted side as themselves, never as null."""
    import math
    import os

    from rooftop.check.probe import Probe
    from rooftop.pipeline.channel import ChannelReader, ChannelWriter
    from rooftop.pipeline.wire import REPLIES, CallReply, Kernel, TraceReply

    read, write = os.pipe()
    writer, reader = ChannelWriter(write), ChannelReader(read)
    probe = Probe(type="Tensor", dtype="float32", shape=[3], device="cpu", positions=[0, 1, 2],
                  values=[math.nan, math.inf, -math.inf])
    writer.send_model(CallReply(id="a", seconds=1e-3, outputs=[probe], spent={"clock": math.nan}))
    writer.send_model(TraceReply(id="b", kernels=[Kernel(name="k", microseconds=math.inf, stream=7)]))
    call = REPLIES.validate_python(reader.receive(deadline=1e12))
    trace = REPLIES.validate_python(reader.receive(deadline=1e12))
    values = call.outputs[0].values
    assert math.isnan(values[0]) and values[1] == math.inf and values[2] == -math.inf
    assert math.isnan(call.spent["clock"]) and trace.kernels[0].microseconds == math.inf


def test_the_side_whose_block_runs_first_alternates_from_block_to_block(monkeypatch):
    """A GPU heated (or left idle) by one side's block must not always meet the other side's."""
    from conftest import FIXTURES

    from rooftop.pipeline.evaluate import evaluate
    from rooftop.pipeline.trusted import calls, timing
    from rooftop.problem.loader import load_problem
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    blocks: list[list[str]] = []  # each timed block's shape and sides, in the order they ran
    inside = [False]
    real_block, real_request = calls.call_block, calls._request_block

    def block(ev, shape, seeds, **options):
        blocks.append([(shape.name, runs[0])])
        real_run = ev.setup.reference.run_block

        def run(*args, **kwargs):
            blocks[-1].append("reference")
            return real_run(*args, **kwargs)

        monkeypatch.setattr(ev.setup.reference, "run_block", run)
        inside[0] = True
        try:
            return real_block(ev, shape, seeds, **options)
        finally:
            inside[0] = False
            monkeypatch.setattr(ev.setup.reference, "run_block", real_run)

    def request(ev, block_request):
        if inside[0]:
            blocks[-1].append("candidate")
        return real_request(ev, block_request)

    real_once = timing._time_once
    runs = [0]

    def once(*args, **kwargs):  # a shape timed again (the wall floor's retry, a busy CPU) draws a new coin
        runs[0] += 1
        return real_once(*args, **kwargs)

    monkeypatch.setattr(timing, "_time_once", once)
    monkeypatch.setattr(timing, "call_block", block)
    monkeypatch.setattr(calls, "_request_block", request)
    problem = load_problem(FIXTURES / "problems" / "scale")
    verdict = evaluate(problem, load_solution(FIXTURES / "solutions" / "good.py"), Settings(device="cpu", timeout=60))
    assert verdict.status.value == "correct", verdict.messages
    assert all(sorted(sides) == ["candidate", "reference"] for _, *sides in blocks), blocks
    for run in {run for run, *_ in blocks}:
        firsts = [first for timed, first, _ in blocks if timed == run]
        assert all(a != b for a, b in zip(firsts, firsts[1:])), (run, firsts)
    assert max(sum(shape == name for shape, *_ in blocks) for name, *_ in blocks) >= 2, blocks


@pytest.mark.parametrize("checks", [True, False])
def test_the_reference_s_timed_calls_gather_probes_exactly_when_the_candidate_s_do(monkeypatch, checks):
    """The child gathers each timed call's outputs at random positions after its end event; on an
    H200 that gather alone made the candidate's GEMMs read 0.3-0.7 % slower than the same GEMMs as
    reference (10_3D_tensor_matrix_multiplication 0.993 with it on one side, 1.000 on both)."""
    from conftest import FIXTURES

    from rooftop.pipeline.evaluate import evaluate
    from rooftop.pipeline.trusted import reference as trusted
    from rooftop.problem.loader import load_problem
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    steps: list[str] = []
    real_queue, real_gather = trusted.TrustedReference._queue, trusted.gather_outputs
    in_block = [False]

    def queue(self, *args, **kwargs):
        out = real_queue(self, *args, **kwargs)
        if in_block[0]:
            steps.append("call")
        return out

    def gather(value):
        steps.append("probe")
        return real_gather(value)

    real_block = trusted.TrustedReference.run_block

    def run_block(self, *args, **kwargs):
        in_block[0] = True
        try:
            return real_block(self, *args, **kwargs)
        finally:
            in_block[0] = False

    monkeypatch.setattr(trusted.TrustedReference, "_queue", queue)
    monkeypatch.setattr(trusted.TrustedReference, "run_block", run_block)
    monkeypatch.setattr(trusted, "gather_outputs", gather)
    problem = load_problem(FIXTURES / "problems" / "scale")
    verdict = evaluate(problem, load_solution(FIXTURES / "solutions" / "good.py"),
                       Settings(device="cpu", timeout=60, checks=checks))
    assert verdict.status.value == "correct", verdict.messages
    calls = steps.count("call")
    assert calls >= 5, steps
    assert steps == (["call", "probe"] * calls if checks else ["call"] * calls), steps
