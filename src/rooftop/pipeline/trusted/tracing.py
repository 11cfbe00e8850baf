"""Every call's kernels, judged on the trusted side.

On a GPU with the checks on, the child traces the kernels of every call it makes, on every stream
(integrity/cupti.py). The trusted side notes each call's reported time as the reply comes, and
every `TRACE_EVERY` calls, at the end of each shape and before the verdict it takes the child's
summaries of them all and holds each call to its own time:

- a kernel of the call that started before the timed window opened ran on a stream that did not
  wait for the caller's: `[side-stream]`, whichever call it was;
- the call's last kernel ended after the window closed (its opening plus the reported time): on
  another stream, work escaped the events (`[side-stream]`); on the caller's own stream, the
  events could not have missed it, so the reported time was forged (`[span]`). The GPU's own
  timestamps put an honest call past its time by a few us now and then (on an H100, once in
  thousands of calls), so such a call is a warning until `TRACE_STRIKES` calls and
  `TRACE_LATE_SHARE` of all calls traced so far are; a candidate that cheats on all but one
  call in 16 reaches both within its first shape;
- the records do not read as the calls made (fewer, more, or the harness's own kernels out of
  place): the tracer was disturbed (`[trace]`).

The child learns which call's kernels are listed in full (for the kernel share) only after that
call and many others have run, so no call differs from the others while it runs."""

from __future__ import annotations

from collections.abc import Sequence

from rooftop.pipeline.trusted.context import Evaluation, Noted
from rooftop.pipeline.wire import CallTrace, TraceReply, TraceRequest
from rooftop.verdict import GateFailed, Status

TRACE_EVERY = 64  # calls between two takes of the child's records (a flush costs about 80 us)
# how far past the reported time a call's last kernel may end: the event pair's own resolution and
# its distance from the spin's end (honest calls ended at most 0.3 us past it over 2,500 calls on an
# H100, 4 us in bare loops once in 800), plus a share of the time
TRACE_SLACK = 5e-6  # the caller's stream
TRACE_SIDE_SLACK = 1e-6  # another stream: a 2-3 us kernel left on a side stream must not fit inside
TRACE_SLACK_SHARE = 0.01
TRACE_STRIKES = 3  # calls past their time from which the evaluation is rejected ...
TRACE_LATE_SHARE = 0.02  # ... once they are also this share of the calls traced so far


def tracing(ev: Evaluation) -> bool:
    """Whether the child traces its calls and the trusted side judges them."""
    return ev.device == "cuda" and ev.settings.checks and ev.trace.untraced == ""


def note_calls(ev: Evaluation, shape: str, seconds: Sequence[float | None], *, listed: int | None = None) -> None:
    """Calls have replied (a block's, or one): note them for the next take, and list call `listed`'s
    kernels in full. A take comes only after all of them: the child ran the whole block before the
    replies came, so a take in the middle of one would find more calls than were noted."""
    if not tracing(ev):
        return
    if listed is not None:
        ev.trace.listed = len(ev.trace.pending) + listed
    ev.trace.pending.extend(Noted(shape, one) for one in seconds)
    if len(ev.trace.pending) >= TRACE_EVERY:
        take_trace(ev)


def take_trace(ev: Evaluation) -> None:
    """Take the child's summaries of the noted calls and judge each one."""
    if not tracing(ev) or not ev.trace.pending:
        return
    assert ev.setup.child is not None
    pending, listed = ev.trace.pending, ev.trace.listed
    ev.trace.pending, ev.trace.listed = [], None
    reply, _ = ev.setup.child.request(TraceRequest(detail=listed), TraceReply, ev.state.deadline)
    if reply.failure is not None:
        raise GateFailed(reply.failure.status, *reply.failure.messages)
    if reply.broken:
        raise GateFailed(Status.rejected, f"[trace] the kernel tracer's records do not read as the harness's calls "
                         f"({reply.broken}): CUPTI was disturbed in the child")
    if reply.dropped:
        raise GateFailed(Status.rejected, f"[trace] the kernel tracer lost {reply.dropped} kernel records: more "
                         "kernels ran between two of its takes than it holds (a million)")
    if len(reply.calls) != len(pending):
        raise GateFailed(Status.rejected, f"[trace] the kernel tracer saw {len(reply.calls)} calls where "
                         f"{len(pending)} were made: its records were disturbed, or the harness's marker "
                         "kernels were imitated")
    ev.trace.calls += len(pending)
    for noted, trace in zip(pending, reply.calls):
        late = judge_call(noted, trace)
        if late is not None:
            ev.trace.late.append(late)
    _judge_late(ev)
    if listed is not None and reply.kernels is not None:
        ev.trace.listed_kernels[pending[listed].shape] = (reply.kernels, pending[listed].seconds)


def _judge_late(ev: Evaluation) -> None:
    """Calls past their time: rejected when there are enough of them, else each one a warning."""
    late = ev.trace.late
    if len(late) >= max(TRACE_STRIKES, TRACE_LATE_SHARE * ev.trace.calls):
        raise GateFailed(Status.rejected, f"{late[0]} ({len(late)} of {ev.trace.calls} calls traced so far "
                         "ended past their reported time)")
    for message in late[ev.trace.warned:]:
        ev.verdict.warnings.append(f"{message} (tolerated: {len(late)} of {ev.trace.calls} calls traced so far; "
                                   f"rejected from {TRACE_STRIKES} calls and {100 * TRACE_LATE_SHARE:.0f} %)")
    ev.trace.warned = len(late)


def judge_call(noted: Noted, trace: CallTrace) -> str | None:
    """One call's kernels against its reported time: raises for kernels that started early; for
    a last kernel that ended late, returns what was wrong (the caller counts those)."""
    where = f"shape '{noted.shape}'"
    if trace.early:
        raise GateFailed(Status.rejected, f"[side-stream] {where}: {trace.early} of a call's {trace.kernels} kernels "
                         f"started before its timed window opened (first: {trace.first_early[:80]}), on a stream "
                         "that did not wait for the caller's; work must run on the caller's current stream, or on "
                         "streams that wait for it and that it waits for, where the harness's events see it")
    if noted.seconds is None or not trace.kernels:
        return None
    reported_us = noted.seconds * 1e6
    own = trace.last_stream == trace.stream
    allowed_us = reported_us * (1 + TRACE_SLACK_SHARE) + 1e6 * (TRACE_SLACK if own else TRACE_SIDE_SLACK)
    if trace.last_end_us <= allowed_us:
        return None
    if own:
        return (f"[span] {where}: a call's last kernel on the caller's stream ({trace.last_name[:80]}) ended "
                f"{trace.last_end_us:.1f} us after its timed window opened, past the {reported_us:.1f} us it "
                "reported: the events bracket every kernel of that stream, so the reported time was forged")
    return (f"[side-stream] {where}: a call's last kernel ({trace.last_name[:80]}) ran on another stream than the "
            f"caller's and ended {trace.last_end_us:.1f} us after the timed window opened, past the "
            f"{reported_us:.1f} us the events measured: work escaped the timed region; the caller's stream must "
            "wait for every stream the call uses")
