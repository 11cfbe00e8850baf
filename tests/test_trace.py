"""The kernel tracer's reading of calls (integrity/cupti.py) and the trusted side's judgement of
each call's kernels (pipeline/trusted/tracing.py), on records made here: no GPU needed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rooftop.integrity.cupti import (
    TAG_CLOSE,
    TAG_CLOSE_QUEUED,
    TAG_FLUSH,
    TAG_OPEN,
    TAG_SPIN,
    KernelRecord,
    TraceBroken,
    split_calls,
)
from rooftop.pipeline.child.call import _summary
from rooftop.pipeline.trusted.context import TraceLog
from rooftop.pipeline.trusted.tracing import TRACE_EVERY, Noted, judge_call, note_calls, take_trace
from rooftop.pipeline.wire import CallTrace, Kernel, TraceReply
from rooftop.verdict import GateFailed, Status

CALLER, SIDE = 7, 13


def _call(at: int, work: list[tuple[str, int, int, int]], stream: int = CALLER,
          queued: bool = False) -> list[KernelRecord]:
    """One call's records from `at` (ns): spin to 190 us, the harness making the inputs to 198 us,
    flush to 228 us, the opening kernel to 230 us, the work (name, start, end from there, stream),
    then the closing kernel after all."""
    opened = at + 230_000
    records = [KernelRecord("rooftop_timer_spin", at, at + 190_000, stream, TAG_SPIN),
               KernelRecord("randn_inputs", at + 191_000, at + 198_000, stream),
               KernelRecord("rooftop_timer_flush", at + 198_000, opened - 2_000, stream, TAG_FLUSH),
               KernelRecord("rooftop_timer_open", opened - 1_500, opened, stream, TAG_OPEN)]
    records += [KernelRecord(name, opened + s, opened + e, st) for name, s, e, st in work]
    last = max([opened, *(opened + e for _, _, e, _ in work)])
    records.append(KernelRecord("rooftop_timer_close_queued" if queued else "rooftop_timer_close", last + 20_000,
                                last + 21_000, stream, TAG_CLOSE_QUEUED if queued else TAG_CLOSE))
    return records


def test_records_split_into_calls_from_spin_to_closing_kernel_with_the_window_at_the_opening_kernels_end():
    first = _call(0, [("gemm", 1_000, 50_000, CALLER), ("side", 2_000, 40_000, SIDE)])
    between = [KernelRecord("gather_outputs", 400_000, 410_000, CALLER)]  # the harness reading the outputs
    second = _call(1_000_000, [("gemm", 1_000, 48_000, CALLER)])
    calls = split_calls(list(reversed(first + between + second)))  # any order: sorted by start
    assert [len(c.kernels) for c in calls] == [2, 1]
    assert calls[0].opened_ns == 230_000 and calls[1].opened_ns == 1_230_000
    assert all(c.stream == CALLER for c in calls)
    assert not {"randn_inputs", "gather_outputs"} & {k.name for c in calls for k in c.kernels}


def test_a_side_stream_kernel_between_two_queued_calls_is_the_earlier_calls_and_late():
    """A block's calls are not waited for one by one: a kernel the first call left on another
    stream can start after its closing kernel. It is that call's, and ends far past its window;
    the harness's own work between the calls (on the caller's stream) stays out."""
    first = _call(0, [("gemm", 1_000, 50_000, CALLER)], queued=True)
    between = [KernelRecord("gather_outputs", 400_000, 410_000, CALLER),
               KernelRecord("hidden", 420_000, 900_000, SIDE)]
    calls = split_calls(first + between + _call(1_000_000, [("gemm", 1_000, 48_000, CALLER)]))
    assert [[k.name for k in c.kernels] for c in calls] == [["gemm", "hidden"], ["gemm"]]
    assert [c.queued for c in calls] == [True, False]
    summary = _summary(calls[0])
    assert summary.last_stream == SIDE and summary.last_end_us == pytest.approx(670.0)
    assert "[side-stream]" in (judge_call(Noted("s", 50e-6), summary) or "")
    # after a waited call nothing of it runs: a CUDA graph's warm-up on a side stream before its
    # capture, between two calls, is the harness's
    waited = split_calls(_call(0, [("gemm", 1_000, 50_000, CALLER)]) + between +
                         _call(1_000_000, [("gemm", 1_000, 48_000, CALLER)]))
    assert [[k.name for k in c.kernels] for c in waited] == [["gemm"], ["gemm"]]


def test_a_kernel_that_starts_during_the_spin_is_the_calls_and_early():
    call = split_calls(_call(0, [("gemm", 1_000, 50_000, CALLER), ("unjoined", -150_000, -100_000, SIDE)]))[0]
    summary = _summary(call)
    assert summary.kernels == 2 and summary.early == 1 and summary.first_early == "unjoined"
    assert summary.last_end_us == pytest.approx(50.0) and summary.last_stream == CALLER


def test_the_inputs_are_the_harnesss_on_the_callers_stream_only():
    """Between the spin and the flush the caller's stream carries the harness's inputs; a kernel on
    another stream there is the call's, and early (it could only be waiting for the inputs)."""
    records = _call(0, [("gemm", 1_000, 50_000, CALLER)]) + [KernelRecord("poll_inputs", 192_000, 229_000, SIDE)]
    summary = _summary(split_calls(records)[0])
    assert summary.kernels == 2 and summary.early == 1 and summary.first_early == "poll_inputs"


@pytest.mark.parametrize("records, words", [
    (_call(0, [])[:4] + _call(500_000, []), "before the previous call had closed"),
    ([r for r in _call(0, []) if r.tag != TAG_FLUSH], "opening kernel came out of its place"),
    ([r for r in _call(0, []) if r.tag != TAG_OPEN], "closing kernel came out of its place"),
    (_call(0, [])[:-1], "no closing kernel"),
    ([*_call(0, []), KernelRecord("rooftop_timer_flush", 240_000, 250_000, CALLER, TAG_FLUSH)], "flush kernel"),
    ([KernelRecord("rooftop_timer_spin", 0, 10, CALLER, TAG_SPIN),
      KernelRecord("rooftop_timer_flush", 20, 30, SIDE, TAG_FLUSH)], "flush kernel came out of its place"),
])
def test_records_that_do_not_read_as_the_harnesss_calls_are_refused(records, words):
    with pytest.raises(TraceBroken, match=words):
        split_calls(records)


def _trace(last_end_us: float, last_stream: int = CALLER, early: int = 0) -> CallTrace:
    return CallTrace(stream=CALLER, kernels=2, early=early, first_early="early_kernel" if early else "",
                     last_end_us=last_end_us, last_stream=last_stream, last_name="k")


def _rule(noted: Noted, trace: CallTrace) -> str | None:
    try:
        late = judge_call(noted, trace)
    except GateFailed as failed:
        assert failed.status is Status.rejected
        return "rejected " + failed.messages[0].split("]")[0] + "]"
    return late.split("]")[0] + "]" if late else None


def test_each_call_is_held_to_its_own_reported_time():
    call = Noted("s", 100e-6)
    assert _rule(call, _trace(100.3)) is None  # an honest call: the last kernel ends at the end event
    assert _rule(call, _trace(105.5)) is None  # within 1 % and 5 us on the caller's stream
    assert _rule(call, _trace(107.0)) == "[span]"  # the caller's stream ran past a time it must bracket
    assert _rule(call, _trace(101.9, SIDE)) is None  # another stream: 1 % and 1 us
    assert _rule(call, _trace(103.5, SIDE)) == "[side-stream]"  # a 2-3 us kernel left on a side stream
    assert _rule(call, _trace(50.0, early=1)) == "rejected [side-stream]"  # started before the window opened: at once
    assert _rule(Noted("s", 1e-3), _trace(1009.0)) is None  # the share grows with the time
    assert _rule(Noted("s", None), _trace(1e6)) is None  # nothing reported, nothing to hold it to


class _Child:
    """A child session that answers trace requests with what the test set."""

    def __init__(self, reply: TraceReply) -> None:
        self.reply, self.requests = reply, []

    def request(self, request, cls, deadline):
        assert cls is TraceReply
        self.requests.append(request)
        return self.reply, 0.001


def _ev(reply: TraceReply, untraced: str = "") -> SimpleNamespace:
    return SimpleNamespace(device="cuda", settings=SimpleNamespace(checks=True), trace=TraceLog(untraced=untraced),
                           setup=SimpleNamespace(child=_Child(reply)), state=SimpleNamespace(deadline=0.0),
                           verdict=SimpleNamespace(warnings=[]))


def test_calls_are_taken_in_batches_and_the_listed_call_named_only_afterwards():
    honest = _trace(10.0)
    kernels = [Kernel(name="mine", microseconds=9.0, stream=CALLER)]
    ev = _ev(TraceReply(calls=[honest] * TRACE_EVERY, kernels=kernels))
    note_calls(ev, "s", [10e-6] * 3)
    note_calls(ev, "s", [10e-6] * (TRACE_EVERY - 4), listed=2)
    assert ev.setup.child.requests == []  # nothing asked while the calls run
    note_calls(ev, "s", [10e-6])
    [request] = ev.setup.child.requests
    assert request.detail == 5
    assert ev.trace.calls == TRACE_EVERY and ev.trace.pending == []
    assert ev.trace.listed_kernels["s"] == (kernels, 10e-6)


def test_a_block_is_noted_whole_before_its_calls_are_taken():
    """The child ran a block's calls before its replies came: a take in the middle of noting them
    would find more calls than were noted, and reject an honest candidate."""
    ev = _ev(TraceReply(calls=[_trace(10.0)] * (TRACE_EVERY + 3)))
    note_calls(ev, "s", [10e-6] * (TRACE_EVERY - 2))
    note_calls(ev, "s", [10e-6] * 5)
    [request] = ev.setup.child.requests
    assert ev.trace.calls == TRACE_EVERY + 3 and ev.trace.pending == []


@pytest.mark.parametrize("reply, words", [
    (TraceReply(calls=[_trace(10.0)] * 2), "saw 2 calls where 3 were made"),
    (TraceReply(calls=[_trace(10.0)] * 3, dropped=40), "lost 40 kernel records"),
    (TraceReply(broken="the last call has no closing kernel"), "do not read as the harness's calls"),
])
def test_a_disturbed_tracer_is_rejected_with_trace(reply, words):
    ev = _ev(reply)
    for _ in range(3):
        note_calls(ev, "s", [10e-6])
    with pytest.raises(GateFailed) as failed:
        take_trace(ev)
    assert failed.value.status is Status.rejected
    assert failed.value.messages[0].startswith("[trace]") and words in failed.value.messages[0]


def test_a_candidate_on_a_side_stream_on_15_calls_in_16_is_rejected_within_its_first_take():
    """Each call is judged, not a sample: honest calls between the others do not hide them."""
    traces = [_trace(10.0)] * 8 + [_trace(10.0) if i % 16 == 0 else _trace(60.0, SIDE) for i in range(56)]
    ev = _ev(TraceReply(calls=traces))
    with pytest.raises(GateFailed, match=r"^\[side-stream\].*\(52 of 64 calls traced so far"):
        note_calls(ev, "s", [10e-6] * TRACE_EVERY)


def test_a_rare_late_call_is_a_warning_and_enough_of_them_a_rejection():
    """The GPU's timestamps put an honest call a few us past its time now and then: one such call
    in many is a warning; three that are also 2 % of the calls traced are a rejection."""
    def take(traces: list[CallTrace]) -> None:
        ev.setup.child.reply = TraceReply(calls=traces)
        ev.trace.pending = [Noted("s", 10e-6)] * len(traces)
        take_trace(ev)

    ev = _ev(TraceReply())
    take([_trace(10.0)] * 99 + [_trace(20.0)])
    [warning] = ev.verdict.warnings
    assert warning.startswith("[span]") and "tolerated: 1 of 100 calls" in warning
    take([_trace(20.0)] * 2 + [_trace(10.0)] * 98)  # 3 late of 200: under 2 %
    assert len(ev.verdict.warnings) == 3
    with pytest.raises(GateFailed, match=r"\(5 of 202 calls"):
        take([_trace(20.0)] * 2)


def test_a_child_whose_timer_cannot_be_sealed_says_its_calls_are_not_traced(tmp_path):
    """The clock marks calls for the tracer only through the sealed timer: without it, the child
    must say so (the trusted side then warns), not claim a tracer whose records it cannot split."""
    from rooftop.pipeline.child.harness import Harness

    harness = Harness.__new__(Harness)
    harness.job = SimpleNamespace(device="cuda", traced=True)
    harness.untraced = "the job asked for no tracing"
    harness.timer_library = str(tmp_path / "no-such-timer.so")
    sealed, why = harness._seal()
    assert sealed == "" and why
    assert harness.untraced.startswith("the sealed timer, whose callbacks the tracer uses, could not be sealed")
    harness.timer_library = ""
    harness._seal()
    assert harness.untraced == "no sealed timer, whose callbacks the tracer uses"
