"""The timing gate's work on one shape: warm-up and timed calls, candidate and reference paired
call by call in blocks (the reference's block and the candidate's on the same inputs, which runs
first alternating from block to block: see pipeline/trusted/calls.py), each call's outputs
probed, its kernels traced (pipeline/trusted/tracing.py) and, where the problem forbids torch
compute, its dispatches audited, every call alike; one call drawn in secret has its kernels listed
for the kernel share; and the cross-checks that flag a suspect measurement.

A reference much slower than the candidate would cost most of the gate if it ran on every call
until the candidate's samples are precise enough. So once it costs at least `REFERENCE_OFF` times
the candidate, the reference is timed until its own samples stop it or they reach the policy's
measured-time minimum (the precision rule asks no more of any long kernel, and an eager reference
that queues many small launches may never reach the precision of the kernel it is compared
with), and then leaves the calls: the speedup is taken over the pairs timed before, and its
interval says how precise that is. The outputs of the later calls are checked after each reply,
on calls drawn in secret then (`CHECK_SHARE`) and on every call faster than any the reference was
paired with; the inputs are made again from the seed. The child cannot tell which calls are
checked: the draw happens after its reply."""

from __future__ import annotations

import secrets
import statistics
import time

from rooftop.check.probe import check_probes
from rooftop.integrity.kernels import busy_seconds, kernel_share, solution_kernel_names
from rooftop.measure.contention import assess, sample_load
from rooftop.measure.loop import PairedSampling, Taken
from rooftop.measure.spread import HOST_BOUND_SPREAD
from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline.trusted.calls import Called, call_block, expect, harness_costs
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.outcomes import ShapeTimed
from rooftop.pipeline.trusted.tracing import take_trace
from rooftop.problem.spec import Shape
from rooftop.values import nbytes
from rooftop.verdict import Gate, GateFailed, Status
from rooftop.vocabulary import Samples

EVENT_EVERY = 0.25  # seconds between two sample-count events
CPU_RETRIES = 1  # a CPU timing that shared its machine is taken again this many times before it is flagged
# a GPU shape whose calls held more untimed work than the wall floor allows is timed again this many
# times before it is rejected: a burst of other work on the host (another worker's build, a neighbour)
# held an honest level-1 self-check's calls for 12 ms each while a 0.25 s minimum took 14 samples,
# and eight timings of the same problem on a quiet host held 1.2-1.7 ms. A forger's untimed work is
# in every timing, so it is rejected on the second
FLOOR_RETRIES = 1
RETRY_PAUSE = 0.5  # seconds before a retry: a passing burst of other work may end
MIN_WINDOW = 0.25  # seconds of load counters read around a CPU shape's timing
REFERENCE_OFF = 2.0  # reference median over candidate median from which a stopped reference leaves the calls
CHECK_SHARE = 4  # one in this many calls without the reference is checked, drawn after its reply
# timed calls queued back to back per request (measure/timer.py): at most this many, about this
# much GPU time per side, and no more expected outputs than this many bytes held on the trusted side
BLOCK_CALLS = 16
BLOCK_SECONDS = 0.02
BLOCK_BYTES = 1 << 30
FLOOR_CALLS = 8  # no-op calls per shape measuring the harness's own cost, before the candidate loads and after timing
# seconds a call may spend outside the clock beyond the harness's cost: on an H100 its median moved
# by up to 30 % (about 300 us of 1 ms) between the no-op calls before loading and after timing, and
# honest examples spent up to 0.9 ms (1.0-1.4x the harness's cost) beyond it on busy runs
FLOOR_SLACK = 500e-6
FLOOR_SHARE = 1.0  # ... plus this share of the harness's cost
FLOOR_TIME_SHARE = 0.05  # ... plus this share of the reported time
# seconds since the solution's last call within which a GPU counts as warm: a shape timed then skips
# the warm-up's time minimum (not its calls); idle longer, the clocks may have come down
STILL_WARM = 0.1
# a shape is flagged `host-bound` when, on at least this share of its timed calls, a side's host took
# longer to queue the call's work than the GPU spun before it: the events then time the host's launches
HOST_BOUND_SHARE = 0.5
# ... plus, on a CPU, this much: the harness and the candidate share the host's cores with whatever
# else runs there, and a busy two-core machine moved honest CPU calls' untimed time by 100-300 us
FLOOR_CPU_SLACK = 1e-3
UNTIMED_WORK = ", so the reported times are forged or the work ran outside the clock"  # the wall floor's conclusion
RETIMED = ("timed again, the shape's calls held no more untimed work than the floor allows (the first timing "
           "shared its host with other work, or its untimed work stopped)")


def warm_start(ev: Evaluation, policy: TimingPolicy) -> TimingPolicy:
    """The policy for the next shape: without the warm-up's time minimum on a GPU that ran the
    solution's calls a moment ago (the last shape's timing, this one's correctness calls), whose
    clocks are up already; the warm-up calls stay, for what a new shape needs on its first calls
    (compiles, autotuning, allocations). The 0.2 s was a fifth of a small shape's timing."""
    if ev.device == "cpu" or ev.calls.last is None or time.monotonic() - ev.calls.last > STILL_WARM:
        return policy
    return policy.model_copy(update={"warmup_seconds": 0.0})


def time_shape(ev: Evaluation, shape: Shape, result: ShapeTimed, policy: TimingPolicy, profiled: bool) -> None:
    """Time one shape; on a CPU, once more when a neighbour shared the machine, then flag it.

    Calls whose round trips held more than the wall floor allows are rejected when a second
    timing holds as much; on a CPU, not when the machine was shared while timing (there the
    harness's own work slowed with the machine, so its cost measured before no longer bounds it,
    and the shape's times go unrewarded anyway). A loaded two-core machine once pushed an honest
    CPU call 4 % past the floor with no load the counters could see: one timing is not proof."""
    if ev.device != "cpu":
        first = None
        for attempt in range(1 + FLOOR_RETRIES):
            warned = len(result.warnings)
            forged = _time_once(ev, shape, result, policy, profiled)
            if not forged:
                if first:
                    result.warnings.append(f"{first}; {RETIMED}")
                return
            if attempt < FLOOR_RETRIES:
                first = forged
                del result.warnings[warned:]  # the next timing's own flags replace this one's
                result.flags.clear()
                time.sleep(RETRY_PAUSE)
        raise GateFailed(Status.rejected, f"{forged} (twice: on a second timing too)")
    first = None
    for attempt in range(1 + CPU_RETRIES):
        # a CPU shape takes a fraction of a second: the first window is the whole gate so far, a
        # retry's starts with a pause, so both are long enough for the load counters to mean something
        before = ev.setup.cpu_load if attempt == 0 and ev.setup.cpu_load is not None else sample_load(ev.own_pids())
        ev.setup.cpu_load = ev.setup.cpu_load or before
        if attempt:
            time.sleep(RETRY_PAUSE)
        started = time.monotonic()
        forged = _time_once(ev, shape, result, policy, profiled)
        assert result.candidate is not None and result.reference is not None
        # the kernel's counters tick every 10 ms: a window shorter than MIN_WINDOW reads as noise,
        # so a quick shape waits out the rest of it (idle, when only other work shows); the window
        # opened with `before`, at the load gate or before a retry's pause, often long enough already
        opened = before.at if before is not None and before.at else started
        time.sleep(max(0.0, MIN_WINDOW - (time.monotonic() - opened)))
        found = assess(before, sample_load(ev.own_pids()), result.candidate.samples, result.reference.samples)
        if not found.contended and not forged:
            if first:
                result.warnings.append(f"{first}; {RETIMED}")
            return
        if forged and not found.contended and attempt == CPU_RETRIES:
            raise GateFailed(Status.rejected, f"{forged} (twice: on a second timing too)" if first else forged)
        if attempt < CPU_RETRIES:  # shared, or untimed work the load counters did not explain: once more
            first = None if found.contended else forged
            result.flags.clear()
    result.flags.append("contention")
    result.warnings.append(f"[contention] shape '{shape.name}': the machine was shared while timing "
                               f"({'; '.join(found.reasons)}); its times and speedup are not trustworthy and "
                               "the reward counts its speedup as 0x")
    if forged:
        result.warnings.append(f"{forged.removesuffix(UNTIMED_WORK)} (not judged: the CPU was shared "
                                   "with other work while timing, which slows the harness's own work as much; "
                                   "nothing says the times were forged)")


def _time_once(ev: Evaluation, shape: Shape, result: ShapeTimed, policy: TimingPolicy,
               profiled: bool) -> str | None:
    """The shape's samples and checks; what the wall floor found wrong, if anything."""
    max_clock = ev.setup.sm_clock.max_mhz if ev.setup.sm_clock is not None else None
    sampling = PairedSampling(policy, sides=2, max_clock_mhz=max_clock)  # candidate, reference
    checks = ev.settings.checks
    counts_compute = not ev.problem.spec.policy.allow_torch_ops  # the dispatch audit has work to do
    pool = ev.calls.checked_seeds.get(shape.name, [])
    calls, reported = 0, 0.0
    untimed: list[float] = []  # each sample's round trip less its reported time and spin (the wall floor's)
    # the call whose kernels are listed is a timed sample drawn in secret, and the child is told
    # which only when the trace of many calls is taken after it: while it runs it is one more call
    listed_at = secrets.randbelow(policy.min_samples) if profiled else -1
    referenced = True  # the reference still runs on every call
    fastest_paired = float("inf")  # the candidate's fastest sample while the reference ran beside it
    queued: dict[str, list[float]] = {"candidate": [], "reference": []}  # timed calls' host seconds to queue
    outran: dict[str, list[float]] = {"candidate": [], "reference": []}  # ... past the spin before them
    sizes = _BlockSize()
    candidate_first = secrets.randbelow(2) == 1  # which side's block runs first: alternated from a coin
    while not sampling.stopped or listed_at >= 0:  # (a wall-time cap may stop it first)
        warming, extra = sampling.warming, sampling.stopped
        size = 1 if warming or extra else sizes.next()
        listed = None
        if listed_at >= 0 and (extra or (not warming and sampling.kept + size > listed_at)):
            listed, listed_at = 0 if extra else max(0, listed_at - sampling.kept), -1
        seeds = [None if checks or not pool else pool[(calls + i) % len(pool)] for i in range(size)]
        referenced = referenced and not _reference_done(sampling)
        block = call_block(ev, shape, seeds, audit=checks and counts_compute, listed=listed, reference=referenced,
                           candidate_first=candidate_first)
        candidate_first = not candidate_first
        for called in block:
            calls += 1
            seconds = float(called.reply.seconds or 0.0)
            result.timed_calls += 1
            sizes.saw(called)
            if checks:
                called = _checked(ev, shape, result, called, calls, referenced or seconds < fastest_paired)
            if extra or sampling.stopped:  # the listed call after a cap; the rest of the block that met the rule
                continue
            reference = Taken(float(called.reference_seconds or 0.0), called.reference_clock,
                              called.reference_wall) if referenced else None
            sampling.record([Taken(seconds, called.clock, called.wall), reference], warming)
            if not warming:
                untimed.append(called.wall - seconds - called.reply.hold)
                _note_queueing(called, referenced, queued, outran)
            if referenced and not warming:
                fastest_paired = min(fastest_paired, seconds)
        if time.monotonic() - reported > EVENT_EVERY:
            reported = time.monotonic()
            ev.state.emit(Samples(gate=Gate.timing, shape=shape.name, kept=sampling.kept, warming=warming))
        del block, called  # inputs and expected outputs go before the next block makes its own
    return _conclude(ev, shape, result, sampling, (queued, outran, untimed), profiled)


def _conclude(ev: Evaluation, shape: Shape, result: ShapeTimed, sampling: PairedSampling,
              noted: tuple[dict[str, list[float]], dict[str, list[float]], list[float]], profiled: bool) -> str | None:
    """The shape's statistics, its listed call and its cross-checks once its samples are in; what
    the wall floor found wrong, if anything. `noted`: each side's host seconds to queue a timed
    call and how far past the spin, and each sample's untimed round trip."""
    queued, outran, untimed = noted
    clock = ev.setup.reference.clock.name if ev.setup.reference is not None else "unknown"
    result.candidate, result.reference = sampling.stats(clock)
    if ev.device != "cpu":  # a CPU call's time is its host's: nothing is queued ahead of it
        result.queue_seconds = {side: statistics.median(times) for side, times in queued.items() if times}
    floored = ev.settings.checks and shape.name in ev.setup.harness_cost
    after = harness_costs(ev, shape, FLOOR_CALLS) if floored else []
    take_trace(ev)
    if profiled:
        judge_listed(ev, shape, result)
    cross_check(ev, shape, result, sampling, outran)
    return judge_floor(ev, shape, result, untimed, after) if floored else None


def _checked(ev: Evaluation, shape: Shape, result: ShapeTimed, called: Called, calls: int, always: bool) -> Called:
    """A timed call's outputs against the expected ones: `always` (beside the reference, or
    faster than any call the reference was paired with), else on a secret draw made after the
    reply, with the reference run on its seed's inputs then; stored either way."""
    compare = always or secrets.randbelow(CHECK_SHARE) == 0
    if compare and called.expected is None:
        called = expect(ev, shape, called)
    result.timed_checks += int(compare)
    started = time.perf_counter()
    _check_timed_output(ev, shape, called, calls, compare)
    ev.add_time("timed_output_checks", time.perf_counter() - started)
    return called


def _note_queueing(called: Called, referenced: bool, queued: dict[str, list[float]],
                   outran: dict[str, list[float]]) -> None:
    """Each side's host seconds to queue a timed call, and how far past the spin before it."""
    queued["candidate"].append(called.reply.queued)
    outran["candidate"].append(called.reply.queued - called.reply.hold)
    if referenced:
        queued["reference"].append(called.reference_queue[0])
        outran["reference"].append(called.reference_queue[0] - called.reference_queue[1])


def judge_floor(ev: Evaluation, shape: Shape, result: ShapeTimed, untimed: list[float],
                after: list[float]) -> str | None:
    """The trusted wall floor: a call's round trip, less the harness's own cost (no-op calls made
    before any candidate code ran) and the spin, is what the call itself took; a reported time
    well below that means the clock was forged (native code can reach anything in the child):
    what was wrong, for the caller to reject. The no-op calls are made again after timing: a
    harness that got slower is flagged, not used."""
    before = ev.setup.harness_cost.get(shape.name, [])
    if not untimed or not before or result.candidate is None:
        return None
    fixed, reported = statistics.median(before), result.candidate.median
    outside = statistics.median(untimed) - fixed
    allowed = FLOOR_SLACK + FLOOR_SHARE * fixed + FLOOR_TIME_SHARE * reported + \
        (FLOOR_CPU_SLACK if ev.device == "cpu" else 0.0)
    result.untimed_seconds, result.harness_seconds = outside, fixed
    if after and statistics.median(after) > fixed + allowed:  # compared, never used: the candidate was loaded
        result.flags.append("wall-floor")
        result.warnings.append(f"[wall-floor] shape '{shape.name}': the harness's own cost per call grew from "
                                   f"{fixed * 1e6:.0f} us before the solution loaded to "
                                   f"{statistics.median(after) * 1e6:.0f} us after timing")
    if outside <= allowed:
        return None
    spin = "" if ev.device == "cpu" else ", the GPU's spin"
    return (f"[wall-floor] shape '{shape.name}': each call's round trip on the trusted clock held a median "
            f"{outside * 1e6:.0f} us more than its reported {reported * 1e6:.1f} us{spin} and the "
            f"harness's own {fixed * 1e6:.0f} us per call (measured before any solution code ran); more than "
            f"{allowed * 1e6:.0f} us of work went untimed{UNTIMED_WORK}")


class _BlockSize:
    """How many timed calls the next block queues: as many as take about `BLOCK_SECONDS` of GPU
    time per side (the slower side's last call: not the largest so far, which a first call's
    compile or autotuning would keep at one for the whole shape), at most `BLOCK_CALLS`, and no
    more expected outputs than `BLOCK_BYTES` (the trusted side holds a block's until the child's
    replies are checked). Warm-up calls come one at a time: a first call compiles, tunes and
    allocates."""

    def __init__(self) -> None:
        self.seconds, self.bytes = 0.0, 0

    def saw(self, called: Called) -> None:
        self.seconds = max(float(called.reply.seconds or 0.0), float(called.reference_seconds or 0.0))
        if called.expected is not None:
            self.bytes = max(self.bytes, nbytes(called.expected))

    def next(self) -> int:
        by_time = int(BLOCK_SECONDS / max(self.seconds, 1e-6))
        by_memory = BLOCK_BYTES // self.bytes if self.bytes else BLOCK_CALLS
        return max(1, min(BLOCK_CALLS, by_time, by_memory))


def _reference_done(sampling: PairedSampling) -> bool:
    """Whether the reference costs enough to leave the calls and has had its samples; a reference
    whose samples reached the measured-time minimum without its precision is stopped here."""
    candidate, reference = sampling.samplers
    if not candidate.samples or reference.median < REFERENCE_OFF * candidate.median:
        return False
    policy = reference.policy
    if reference.stopped_by is None and reference.measured >= policy.min_seconds and \
            len(reference.samples) >= policy.min_samples:
        reference.stopped_by = "min_seconds"
    return reference.stopped_by is not None


def _check_timed_output(ev: Evaluation, shape: Shape, called: Called, calls: int, compare: bool = True) -> None:
    """The reply's outputs against the expected ones (when `compare`), and their storage always."""
    reply = called.reply
    mismatches = check_probes(ev.problem.spec, called.expected, reply.outputs) if compare else []
    if mismatches or reply.aliased_inputs:
        what = f"{mismatches[0].output}: {mismatches[0].message}" if mismatches else \
            f"an output shares storage with input(s) {reply.aliased_inputs}"
        raise GateFailed(Status.incorrect, f"[timed-output] shape '{shape.name}', call {calls} after the "
                         f"correctness checks: {what}")


def cross_check(ev: Evaluation, shape: Shape, result: ShapeTimed, sampling: PairedSampling,
                outran: dict[str, list[float]] | None = None) -> None:
    """Flags on a measurement that is suspect without being proof of cheating."""
    flags: list[tuple[str, str]] = []
    bound = host_bound(outran or {})
    if bound:
        if result.queue_seconds:
            bound += " (median host time to queue a call: " + ", ".join(
                f"{side} {seconds * 1e3:.2f} ms" for side, seconds in result.queue_seconds.items()) + ")"
        flags.append(("host-bound", f"{bound}: the events timed the host's launches, not the GPU's work alone. "
                      "A host's launch rate differs from one process to the next (on an H200 host the same 2,161 "
                      "kernels took 9.5 to 16 ms a call in fresh processes pinned to one core), so this speedup "
                      "holds for these two processes. Its interval is widened by what lies between processes: by the "
                      "problem's stored self-checks (`rooftop baselines --kinds self`) where there are some, else by "
                      f"±{HOST_BOUND_SPREAD:.0%}, which KernelBench level 3's host-bound self-checks strayed by"))
    stats, candidate = result.candidate, sampling.samplers[0]
    assert stats is not None
    if candidate.many_dropped:
        flags.append(("clocks", f"{candidate.dropped} of {candidate.dropped + stats.n} samples were taken below "
                      f"{100 * candidate.policy.min_clock_fraction:.0f}% of the {candidate.max_clock_mhz:.0f} MHz "
                      "maximum SM clock and taken again; the GPU was capped or shared"))
    if stats.wall_seconds is not None and sum(stats.samples) > stats.wall_seconds:
        flags.append(("wall", f"the timed samples add up to {sum(stats.samples):.4g} s but the host's wall clock "
                      f"around them measured {stats.wall_seconds:.4g} s"))
    for tag, message in flags:
        result.flags.append(tag)
        result.warnings.append(f"[{tag}] shape '{shape.name}': {message}")


def host_bound(outran: dict[str, list[float]]) -> str:
    """Which sides' hosts queued their calls' work for longer than the GPU spun before them, on at
    least HOST_BOUND_SHARE of the timed calls ("" when neither did)."""
    sides = []
    for side, excess in outran.items():
        late = [x for x in excess if x > 0]
        if excess and len(late) >= HOST_BOUND_SHARE * len(excess):
            by = statistics.median(late) * 1e6
            sides.append(f"the {side}'s host took longer to queue a call than the spin before it on "
                         f"{len(late)} of {len(excess)} timed calls (by a median {by:.0f} us)")
    return "; ".join(sides)


def judge_listed(ev: Evaluation, shape: Shape, result: ShapeTimed) -> None:
    """The listed call's kernels: the solution's share of GPU kernel time."""
    minimum = ev.problem.spec.policy.min_kernel_share
    listed = ev.trace.listed_kernels.pop(shape.name, None)
    if listed is None:
        why = ev.trace.untraced or "no call's kernels were listed"
        if minimum is not None:
            raise GateFailed(Status.internal_error, f"[kernel-share] shape '{shape.name}': this problem requires a "
                             f"minimum kernel share and the kernels were not traced ({why})")
        result.warnings.append(f"kernel share was not measured: {why}")
        return
    kernels, seconds = listed
    result.kernel_share = kernel_share(kernels, solution_kernel_names(ev.solution.files))
    result.profiled_kernel_seconds = busy_seconds(kernels)
    result.profiled_event_seconds = seconds
    if minimum is not None and (result.kernel_share or 0.0) < minimum:
        share = f"{100 * (result.kernel_share or 0.0):.0f}%"
        raise GateFailed(Status.rejected, f"[kernel-share] shape '{shape.name}': {share} of GPU time was in kernels "
                         f"the solution defines; this problem requires at least {100 * minimum:.0f}%")
