"""The gates that need the child — build, load, correctness, timing — driven from the trusted side.

Each candidate call goes the same way whatever it is for (a full check, a warm-up, a timed
sample, a profile): the trusted side draws a fresh secret seed, the child makes the inputs from
it, runs and times the call and reads values at random positions of the outputs; the trusted
side makes the same inputs, runs the reference and checks what came back. A candidate cannot
tell a checked call from a timed one, and no input is ever seen twice.
"""

from __future__ import annotations

import random
import secrets
import time
from typing import Any, NamedTuple

import torch

from rooftop.check.compare import Mismatch, compare_outputs, error_figures
from rooftop.check.probe import check_probes, same_inputs
from rooftop.integrity.kernels import kernel_share, solution_kernel_names
from rooftop.measure.clocks import SmClock
from rooftop.measure.stopping import Sampler, TimingPolicy
from rooftop.pipeline.job import EvalJob, Settings
from rooftop.pipeline.protocol import Reply
from rooftop.pipeline.session import ChildSession
from rooftop.pipeline.tensorfile import load_tensors
from rooftop.pipeline.trusted import TrustedReference
from rooftop.pipeline.verdict import Gate, SeedCheck, ShapeResult, Status
from rooftop.problem.spec import Shape

AUDIT_SHARE = 0.125  # share of warm-up and timed calls that also run the dispatch audit (their samples are dropped)
ESCAPED_WORK = 1.1  # profiled kernel time over the event-timed median that means work escaped the events


class Called(NamedTuple):
    """One candidate call as the trusted side saw it."""

    reply: Reply
    expected: Any
    inputs: list
    reference_seconds: float | None
    wall: float  # trusted wall time of the child's round trip
    reference_wall: float  # trusted wall time of the reference run
    reference_clock: float | None  # SM clock (MHz) just after the reference ran
    clock: float | None  # SM clock just after the candidate's call


class GateStop(Exception):
    """A gate failed: the status and messages for the verdict."""

    def __init__(self, gate: Gate, status: Status, *messages: str) -> None:
        super().__init__(messages[0] if messages else status.value)
        self.gate, self.status, self.messages = gate, status, [m for m in messages if m]


class Seeds:
    """Fresh secret seeds, or a reproducible stream when the settings fix a base seed."""

    def __init__(self, base: int | None) -> None:
        self._rng = random.Random(base) if base is not None else None

    def next(self) -> int:
        return self._rng.randrange(2**31 - 1) if self._rng else secrets.randbits(31)


class Driver:
    def __init__(self, session: ChildSession, job: EvalJob, settings: Settings, trusted: TrustedReference) -> None:
        self.session, self.job, self.settings, self.trusted = session, job, settings, trusted
        self.spec = job.problem.spec
        self.seeds = Seeds(settings.seed)
        self.checks = settings.checks
        self.deadline = 0.0
        self.gate = Gate.correctness
        self._pool: dict[str, list[int]] = {}  # checks off: the seeds every call cycles over
        self.counts_compute = not self.spec.policy.allow_torch_ops  # the dispatch audit has work to do
        # the profiled call (kernel share, streams, work outside the events): on the GPU with the
        # checks on, once per shape
        required = self.spec.policy.min_kernel_share is not None
        self.profiled = {s.name for s in job.shapes} \
            if job.device == "cuda" and self.checks and (settings.profile or required) else set()
        self.warnings: list[str] = []  # for the verdict: checks that could not run, measurements flagged
        self.sm_clock: SmClock | None = None
        if job.device == "cuda":
            self.sm_clock, why = SmClock.open(trusted.device)
            if self.sm_clock is None:
                self.warnings.append(f"[clocks] SM clocks were not sampled: {why}")

    # -- one call ------------------------------------------------------------------------------
    def call(self, shape: Shape, *, full: bool = False, audit: bool = False, profile: bool = False,
             timed: bool = False, seed: int | None = None) -> Called:
        """One call of the candidate on fresh inputs (timed: with the reference timed before it on
        the same inputs, both in a CUDA graph under --graphs)."""
        seed = self.seeds.next() if seed is None else seed
        inputs = self.trusted.inputs(shape, seed)
        graph = timed and self.settings.graphs and not profile
        started = time.perf_counter()
        expected, reference_seconds = self.trusted.run(shape, inputs, timed=timed, graph=graph)
        reference_wall = time.perf_counter() - started
        reference_clock = self._clock() if timed else None
        reply, wall = self.session.request(
            "call", self.deadline, gate=self.gate.value, shape=shape.name, seed=seed, full=full, profile=profile,
            audit=audit and self.checks and not graph, check_inputs=full, probe=self.checks or full,
            reuse=not self.checks, graph=graph)
        clock = self._clock() if timed else None
        if reply.failure is not None:
            raise GateStop(self.gate, Status(reply.failure.status), *reply.failure.messages)
        if reply.findings:
            raise GateStop(self.gate, Status.rejected, *reply.findings)
        wrong_inputs = same_inputs(inputs, reply.inputs) if full else ""
        if wrong_inputs:
            raise GateStop(self.gate, Status.rejected, f"[inputs] shape '{shape.name}', seed {seed}: the inputs the "
                           f"child made differ from the trusted side's ({wrong_inputs}); get_inputs was altered "
                           "in the child or does not reproduce across processes")
        if reply.seconds is not None and not (0 < reply.seconds <= wall):
            raise GateStop(self.gate, Status.rejected, f"[protocol] the child reported {reply.seconds:.3g} s for a "
                           f"call that took {wall:.3g} s of trusted wall time")
        return Called(reply, expected, inputs, reference_seconds, wall, reference_wall, reference_clock, clock)

    def _clock(self) -> float | None:
        return self.sm_clock.read() if self.sm_clock is not None else None

    # -- correctness ---------------------------------------------------------------------------
    def correctness(self, shape: Shape, result: ShapeResult) -> None:
        previous: list[tuple[Any, Any]] = []
        for _ in range(self.settings.seeds_per_shape):
            seed = self.seeds.next()
            self._pool.setdefault(shape.name, []).append(seed)
            called = self.call(shape, full=True, audit=True, seed=seed)
            check = self._judge(shape, seed, called.reply, called.expected, called.inputs, previous)
            result.checks.append(check)
            if not check.ok:
                result.correct = False
                raise GateStop(Gate.correctness, Status.incorrect, f"shape '{shape.name}' ({_params(shape.params)}), "
                               f"seed {seed}: {check.message}")
        result.correct = True

    def _judge(self, shape: Shape, seed: int, reply: Reply, expected: Any, inputs: list,
               previous: list[tuple[Any, Any]]) -> SeedCheck:
        check = SeedCheck(seed=seed, ok=True)
        got = None
        if reply.dump is not None:
            try:
                got = load_tensors(self.session.scratch / "outputs.bin", reply.dump, self.trusted.device)
            except (OSError, ValueError) as exc:
                raise GateStop(self.gate, Status.rejected, f"[protocol] the outputs file is not what the reply "
                               f"describes: {exc}")
            got = got[0] if len(got) == 1 and not isinstance(expected, (list, tuple)) else got
        if reply.changed_inputs:
            check.ok, check.message = False, f"the candidate modified input(s) {reply.changed_inputs} in place"
        elif reply.aliased_inputs:
            check.ok, check.message = False, f"an output shares storage with input(s) {reply.aliased_inputs}"
        else:
            mismatches = compare_outputs(self.spec, expected, got, inputs) if got is not None \
                else check_probes(self.spec, expected, reply.outputs)
            if mismatches:
                _fill(check, mismatches[0])
                stale = _repeats(got, expected, previous)
                if stale:
                    check.message = f"[dependence] {stale}; {check.message}"
            elif got is not None:
                for key, value in error_figures(expected, got).items():
                    setattr(check, key, value)
        if got is not None:
            previous.append((got, expected))
        return check

    # -- timing --------------------------------------------------------------------------------
    def timing(self, shape: Shape, result: ShapeResult, policy: TimingPolicy) -> None:
        """Warm-up and timed calls, candidate and reference paired call by call (A B A B ...)."""
        max_clock = self.sm_clock.max_mhz if self.sm_clock is not None else None
        candidate, reference = Sampler(policy, max_clock_mhz=max_clock), Sampler(policy, max_clock_mhz=max_clock)
        walls = [0.0, 0.0]  # trusted wall time around the kept samples: candidate, reference
        pool = self._pool.get(shape.name, [])
        calls = 0
        # the profiled call takes the place of a timed sample drawn in secret: to the child it is
        # one more call of this shape, neither first nor last
        profile_at = secrets.randbelow(policy.min_samples) if shape.name in self.profiled else -1
        while candidate.stopped_by is None or profile_at >= 0:  # (a wall-time cap may stop it first)
            warming = candidate.warming
            profile = profile_at >= 0 and (candidate.stopped_by is not None or
                                           (not warming and len(candidate.samples) >= profile_at))
            audit = self.checks and self.counts_compute and random.random() < AUDIT_SHARE and not profile
            seed = None if self.checks or not pool else pool[calls % len(pool)]
            called = self.call(shape, audit=audit, profile=profile, timed=True, seed=seed)
            reply = called.reply
            calls += 1
            if self.checks:
                result.timed_checks += 1
                mismatches = check_probes(self.spec, called.expected, reply.outputs)
                if mismatches or reply.aliased_inputs:
                    what = f"{mismatches[0].output}: {mismatches[0].message}" if mismatches else \
                        f"an output shares storage with input(s) {reply.aliased_inputs}"
                    raise GateStop(Gate.timing, Status.incorrect, f"[timed-output] shape '{shape.name}', call "
                                   f"{calls} after the correctness checks: {what}")
            if profile:
                profile_at = -1
                self._judge_profile(shape, result, reply)
            elif warming:
                candidate.warmed()
                reference.warmed()
            elif audit:  # an audited call ran under the dispatch hook, which slows it: not a sample
                continue
            elif candidate.low_clock(called.clock) or reference.low_clock(called.reference_clock):
                candidate.drop()  # the pair goes together, so the speedup stays paired
                reference.drop()
            else:
                candidate.add(float(reply.seconds or 0.0), called.clock)
                reference.add(float(called.reference_seconds or 0.0), called.reference_clock)
                walls[0] += called.wall
                walls[1] += called.reference_wall
            if not profile:  # a GPU at its power limit idles a while before the next pair
                time.sleep(max(candidate.pause_after(float(reply.seconds or 0.0), called.clock),
                               reference.pause_after(float(called.reference_seconds or 0.0), called.reference_clock)))
        clock = self.trusted.clock.name if self.trusted.clock is not None else "unknown"
        result.candidate, result.reference = candidate.stats(clock, walls[0]), reference.stats(clock, walls[1])
        self._cross_check(shape, result, candidate)

    def _cross_check(self, shape: Shape, result: ShapeResult, candidate: Sampler) -> None:
        """Flags on a measurement that is suspect without being proof of cheating."""
        flags: list[tuple[str, str]] = []
        stats = result.candidate
        assert stats is not None
        if candidate.many_dropped:
            flags.append(("clocks", f"{candidate.dropped} of {candidate.dropped + stats.n} samples were taken below "
                          f"{100 * candidate.policy.min_clock_fraction:.0f}% of the {candidate.max_clock_mhz:.0f} MHz "
                          "maximum SM clock and taken again; the GPU was capped or shared"))
        if stats.wall_seconds is not None and sum(stats.samples) > stats.wall_seconds:
            flags.append(("wall", f"the timed samples add up to {sum(stats.samples):.4g} s but the host's wall clock "
                          f"around them measured {stats.wall_seconds:.4g} s"))
        kernel_seconds = result.profiled_kernel_seconds
        if kernel_seconds is not None and stats.n and kernel_seconds > ESCAPED_WORK * stats.median:
            flags.append(("events", f"the profiled call's kernels took {kernel_seconds * 1e6:.1f} us, "
                          f"{kernel_seconds / stats.median:.2f}x the {stats.median * 1e6:.1f} us median the events "
                          "measured: work escaped the timed region"))
        for tag, message in flags:
            result.flags.append(tag)
            self.warnings.append(f"[{tag}] shape '{shape.name}': {message}")

    def _judge_profile(self, shape: Shape, result: ShapeResult, reply: Reply) -> None:
        """The profiled call: the solution's share of GPU kernel time, and the streams it used."""
        if reply.kernels is None:
            if self.spec.policy.min_kernel_share is not None:
                raise GateStop(Gate.timing, Status.internal_error, f"[kernel-share] shape '{shape.name}': this "
                               f"problem requires a minimum kernel share and {reply.detail or 'the profiler did not run'}")
            self.warnings.append(f"kernel share and streams were not checked: {reply.detail or 'no profile'}")
            return
        kernels = reply.kernels
        elsewhere = [k for k in kernels if k.stream != reply.stream]
        if elsewhere:
            raise GateStop(Gate.timing, Status.rejected, f"[side-stream] shape '{shape.name}': {len(elsewhere)} of the "
                           f"call's {len(kernels)} kernels ran on another stream than the caller's (first: "
                           f"{elsewhere[0].name[:80]}); work must run on the caller's current stream, where the "
                           "harness's events see it")
        result.kernel_share = kernel_share(kernels, solution_kernel_names(self.job.solution.files))
        result.profiled_kernel_seconds = sum(k.microseconds for k in kernels) / 1e6
        minimum = self.spec.policy.min_kernel_share
        if minimum is not None and (result.kernel_share or 0.0) < minimum:
            share = f"{100 * (result.kernel_share or 0.0):.0f}%"
            raise GateStop(Gate.timing, Status.rejected, f"[kernel-share] shape '{shape.name}': {share} of GPU time "
                           f"was in kernels the solution defines; this problem requires at least {100 * minimum:.0f}%")


def _fill(check: SeedCheck, mismatch: Mismatch) -> None:
    tol = mismatch.tolerance
    check.ok = False
    check.output = mismatch.output
    check.message = f"{mismatch.output}: {mismatch.message}"
    check.max_abs_error, check.max_rel_error = mismatch.max_abs_error, mismatch.max_rel_error
    check.norm_rel_error = mismatch.norm_rel_error
    if tol is not None:
        check.atol, check.rtol, check.norm_bound = tol.atol, tol.rtol, tol.norm_bound


def _repeats(got: Any, expected: Any, previous: list[tuple[Any, Any]]) -> str:
    """When a wrong output is bit for bit an earlier one although the expected outputs differ."""
    if got is None:
        return ""
    for old_got, old_expected in previous:
        if _equal(got, old_got) and not _equal(expected, old_expected):
            return "the output repeated an earlier call's output although the inputs changed (replayed, not computed)"
    return ""


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return False


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
