"""The gates, in the order the runner takes them: static → build → load → correctness → timing →
score. Each is a small object whose `run` does one gate's work (for one shape, in the gates that
go shape by shape) and returns its record or raises `GateFailed`. Deadlines, order and the
record of a failure belong to the runner (runner.py), not to the gates."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline.trusted.calls import harness_costs
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.correctness import check_shape
from rooftop.pipeline.trusted.reference import TrustedReference
from rooftop.pipeline.trusted.scoring import score
from rooftop.pipeline.trusted.spawn import start_child
from rooftop.pipeline.trusted.static import check_solution_files
from rooftop.pipeline.trusted.timing import FLOOR_CALLS, time_shape, warm_start
from rooftop.pipeline.trusted.tracing import take_trace
from rooftop.pipeline.wire import BuildReply, BuildRequest, JobReply, JobRequest, LoadReply, LoadRequest
from rooftop.problem.spec import Shape
from rooftop.verdict import Gate, GateFailed, GateRecord, Status

# seconds a gate may take when the settings do not say: a first CUDA build takes minutes, a CPU
# smoke shape seconds; a shape also gets REFERENCE_FACTOR times what one reference call took here
LOAD_SECONDS = {"cpu": 30.0, "cuda": 180.0}
SHAPE_SECONDS = {"cpu": 20.0, "cuda": 120.0}
REFERENCE_FACTOR = 200


class GateStep:
    gate: ClassVar[Gate]
    per_shape: ClassVar[bool] = False
    # runs work on the evaluation's GPU: the runner takes the GPU's lease first (held to the end)
    holds_device: ClassVar[bool] = False

    def wanted(self, ev: Evaluation) -> bool:
        return True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float | None:
        """Seconds this gate may take (per shape for per-shape gates); None: no child to wait for."""
        return None

    def run(self, ev: Evaluation, shape: Shape | None = None) -> GateRecord:
        raise NotImplementedError


class StaticGate(GateStep):
    gate = Gate.static

    def run(self, ev: Evaluation, shape: Shape | None = None) -> GateRecord:
        check_solution_files(ev.solution, ev.problem.spec.policy)
        return GateRecord(gate=self.gate, ok=True)


class BuildGate(GateStep):
    """Starts the child (sandboxed); while its interpreter and torch come up, sets up the trusted
    side and plans device memory (a shape that cannot fit is refused here, before any candidate
    code runs); then hands the child the job and has it build the solution."""

    gate = Gate.build
    holds_device = True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float:
        return ev.settings.build_timeout

    def run(self, ev: Evaluation, shape: Shape | None = None) -> GateRecord:
        assert ev.job is not None
        started = time.perf_counter()
        ev.session = start_child(ev)
        ev.trusted = TrustedReference(ev.job.problem, ev.device, ev.job.weights_seed)
        if ev.device == "cuda":
            import torch

            from rooftop.pipeline.trusted.memory import plan_pools

            free, _ = torch.cuda.mem_get_info(ev.trusted.device)
            try:
                ev.pool_sets = plan_pools(ev.trusted.instance, ev.shapes, free)
            except GateFailed:
                # memory of a process that has just ended (the previous evaluation's child) comes
                # back to the driver a moment after it exits: refuse only once it has stopped growing
                ev.pool_sets = plan_pools(ev.trusted.instance, ev.shapes, _settled_free_memory(ev.trusted.device, free))
            _warm_fused_checks(ev)
        ev.phases["trusted_setup"] = time.perf_counter() - started
        ev.session.hello(ev.state.deadline)
        ev.phases["child_start"] = time.perf_counter() - started
        return hand_over_and_build(ev)


def hand_over_and_build(ev: Evaluation) -> GateRecord:
    """Give the started child its job and have it build the solution: the build gate's record."""
    assert ev.session is not None and ev.job is not None
    reply, _ = ev.session.request(JobRequest(job=ev.job), JobReply, ev.state.deadline)
    raise_failure(reply)
    if reply.environment is not None:  # None from a build-stage child, which sees no GPU to describe
        ev.verdict.environment = reply.environment
        if reply.unsealed:
            ev.verdict.warnings.append(f"[sealed] the timer could not be sealed in the evaluation child "
                                       f"({reply.unsealed}); its times rest on the trusted wall floor alone")
        ev.untraced = reply.untraced
        if ev.device == "cuda" and ev.settings.checks and reply.untraced:
            ev.verdict.warnings.append(f"[trace] the calls' kernels were not traced ({reply.untraced}): work on "
                                       "side streams and forged spans were not checked")
        if ev.device == "cuda" and ev.trusted is not None:
            _trace_reference(ev, traced=ev.settings.checks and not reply.untraced)
        if ev.settings.timing and ev.settings.checks:  # the harness's cost per call, before any candidate code
            for shape in ev.shapes:
                ev.harness_cost[shape.name] = harness_costs(ev, shape, FLOOR_CALLS)
    built, _ = ev.session.request(BuildRequest(), BuildReply, ev.state.deadline)
    raise_failure(built)
    ev.phases["build"] = built.seconds
    return GateRecord(gate=Gate.build, ok=True, seconds=built.seconds, cached=built.cached)


def _trace_reference(ev: Evaluation, traced: bool) -> None:
    """The reference's timed calls carry the kernel tracer exactly when the candidate's do; where
    the trusted side cannot attach it, the verdict says which way that leans."""
    from rooftop.measure.timer import native_timer

    assert ev.trusted is not None
    ev.trusted.traced = traced
    timer, why = native_timer(ev.trusted.device)
    if traced and (timer is None or why):
        ev.verdict.warnings.append(f"[trace] the reference's timed calls could not carry the kernel tracer the "
                                   f"candidate's carry ({why}); CUPTI's kernel records cost memory-bound kernels up "
                                   "to 5 % of their time, so the speedup leans against the candidate by as much")


def _warm_fused_checks(ev: Evaluation) -> None:
    """Outputs of gigabytes are compared by Triton kernels (check/fused.py): load them now, while
    the child's interpreter starts, rather than in the first correctness call."""
    from rooftop.check import fused
    from rooftop.pipeline.trusted.memory import input_bytes

    assert ev.trusted is not None
    if any((input_bytes(ev.trusted.instance, s) or 0) >= 4 * fused.MIN_ELEMENTS for s in ev.shapes):
        fused.warm(ev.trusted.device)


def _settled_free_memory(device: Any, free: int, wait: float = 5.0, every: float = 0.25) -> int:
    """The most free device memory seen over `wait` seconds (asked only when the plan failed)."""
    import torch

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(every)
        free = max(free, torch.cuda.mem_get_info(device)[0])
    return free


class LoadGate(GateStep):
    gate = Gate.load
    holds_device = True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float:
        return ev.settings.timeout or LOAD_SECONDS[ev.device]

    def run(self, ev: Evaluation, shape: Shape | None = None) -> GateRecord:
        assert ev.session is not None and ev.job is not None and ev.trusted is not None
        loaded, _ = ev.session.request(LoadRequest(), LoadReply, ev.state.deadline)
        raise_failure(loaded)
        ev.phases.update({f"child_{k}": v for k, v in loaded.phases.items()})
        if ev.device == "cpu":  # the load counters' first window opens here (pipeline/trusted/timing.py)
            from rooftop.measure.contention import sample_load

            ev.cpu_load = sample_load(ev.own_pids())
        if ev.device == "cuda":
            from rooftop.measure.clocks import SmClock

            ev.sm_clock, why = SmClock.open(ev.trusted.device)
            if ev.sm_clock is None:
                ev.verdict.warnings.append(f"[clocks] SM clocks were not sampled: {why}")
        return GateRecord(gate=self.gate, ok=True, seconds=loaded.seconds, detail=loaded.detail)


class ShapeGate(GateStep):
    """A gate that goes shape by shape, each shape with its own deadline."""

    per_shape = True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float:
        if ev.settings.timeout:
            return ev.settings.timeout
        assert ev.trusted is not None and shape is not None
        return SHAPE_SECONDS[ev.device] + REFERENCE_FACTOR * ev.trusted.call_seconds(shape)


class CorrectnessGate(ShapeGate):
    gate = Gate.correctness
    holds_device = True

    def run(self, ev: Evaluation, shape: Shape | None = None) -> GateRecord:
        assert shape is not None
        check_shape(ev, shape, ev.results[shape.name])
        take_trace(ev)
        return GateRecord(gate=self.gate, ok=True)


class TimingGate(ShapeGate):
    gate = Gate.timing
    holds_device = True

    def wanted(self, ev: Evaluation) -> bool:
        return ev.settings.timing

    def run(self, ev: Evaluation, shape: Shape | None = None) -> GateRecord:
        assert shape is not None
        policy = ev.settings.timing_policy or TimingPolicy.for_device(ev.device)
        # the sampler's wall cap stays inside the shape's deadline
        policy = policy.model_copy(update={"max_wall_seconds": min(policy.max_wall_seconds, 0.75 * ev.state.limit)})
        time_shape(ev, shape, ev.results[shape.name], warm_start(ev, policy), profiled=self._profiled(ev))
        return GateRecord(gate=self.gate, ok=True)

    @staticmethod
    def _profiled(ev: Evaluation) -> bool:
        """One call per shape whose kernels are listed (the kernel share): on a GPU with the checks
        on, when asked or when the problem requires a minimum kernel share."""
        required = ev.problem.spec.policy.min_kernel_share is not None
        return ev.device == "cuda" and ev.settings.checks and (ev.settings.profile or required)


class ScoreGate(GateStep):
    gate = Gate.score

    def run(self, ev: Evaluation, shape: Shape | None = None) -> GateRecord:
        detail, impossible = score(ev.verdict, ev.problem, ev.settings.timing)
        if impossible:
            raise GateFailed(Status.rejected, *impossible)
        return GateRecord(gate=self.gate, ok=True, detail=detail)


GATES: tuple[GateStep, ...] = (StaticGate(), BuildGate(), LoadGate(), CorrectnessGate(), TimingGate(), ScoreGate())


def raise_failure(reply: JobReply | BuildReply | LoadReply) -> None:
    if reply.failure is not None:
        raise GateFailed(reply.failure.status, *reply.failure.messages, cached=reply.failure.cached)

