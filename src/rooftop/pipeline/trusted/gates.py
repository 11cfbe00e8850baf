"""The gates, in the order the runner takes them: static → build → load → correctness → timing →
score. Each is a small object whose `run` does one gate's work (for one shape, in the gates that
go shape by shape), filling the typed outcome the runner hands it (pipeline/trusted/outcomes.py),
or raises `GateFailed`. Deadlines, order and the verdict (written from the outcomes by
`outcomes.assemble`) belong to the runner (runner.py), not to the gates."""

from __future__ import annotations

from typing import ClassVar

from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.correctness import check_shape
from rooftop.pipeline.trusted.outcomes import GateOutcome, Scored, ShapeChecked, ShapeTimed
from rooftop.pipeline.trusted.scoring import score
from rooftop.pipeline.trusted.setup import raise_failure
from rooftop.pipeline.trusted.static import check_solution_files
from rooftop.pipeline.trusted.timing import time_shape, warm_start
from rooftop.pipeline.trusted.tracing import take_trace
from rooftop.pipeline.wire import BuildReply, BuildRequest, LoadReply, LoadRequest
from rooftop.problem.spec import Shape
from rooftop.verdict import Gate, GateFailed, Status

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
    # runs the solution: the runner sets the evaluation up (pipeline/trusted/setup.py) before the first such gate
    needs_setup: ClassVar[bool] = False

    def wanted(self, ev: Evaluation) -> bool:
        return True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float | None:
        """Seconds this gate may take (per shape for per-shape gates); None: no child to wait for."""
        return None

    def outcome(self, shape: Shape | None = None) -> GateOutcome:
        """The empty outcome this gate fills (for one shape, in the gates that go shape by shape)."""
        return GateOutcome(gate=self.gate, shape=shape.name if shape is not None else None)

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        raise NotImplementedError


class StaticGate(GateStep):
    gate = Gate.static

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        check_solution_files(ev.solution, ev.problem.spec.policy)


class BuildGate(GateStep):
    """Has the started child build the solution (pipeline/trusted/setup.py started it and set up
    the trusted side first, under this gate's deadline)."""

    gate = Gate.build
    holds_device = True
    needs_setup = True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float:
        return ev.settings.build_timeout

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        assert ev.setup.child is not None
        built, _ = ev.setup.child.request(BuildRequest(), BuildReply, ev.state.deadline)
        raise_failure(built)
        ev.phases["build"] = built.seconds
        outcome.seconds, outcome.cached = built.seconds, built.cached


class LoadGate(GateStep):
    gate = Gate.load
    holds_device = True
    needs_setup = True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float:
        return ev.settings.timeout or LOAD_SECONDS[ev.device]

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        assert ev.setup.child is not None and ev.setup.reference is not None
        loaded, _ = ev.setup.child.request(LoadRequest(), LoadReply, ev.state.deadline)
        raise_failure(loaded)
        ev.phases.update({f"child_{k}": v for k, v in loaded.phases.items()})
        if ev.device == "cpu":  # the load counters' first window opens here (pipeline/trusted/timing.py)
            from rooftop.measure.contention import sample_load

            ev.setup.cpu_load = sample_load(ev.own_pids())
        if ev.device == "cuda":
            from rooftop.measure.clocks import SmClock

            ev.setup.sm_clock, why = SmClock.open(ev.setup.reference.device)
            if ev.setup.sm_clock is None:
                outcome.warnings.append(f"[clocks] SM clocks were not sampled: {why}")
        outcome.seconds, outcome.detail = loaded.seconds, loaded.detail


class ShapeGate(GateStep):
    """A gate that goes shape by shape, each shape with its own deadline."""

    per_shape = True

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float:
        if ev.settings.timeout:
            return ev.settings.timeout
        assert ev.setup.reference is not None and shape is not None
        return SHAPE_SECONDS[ev.device] + REFERENCE_FACTOR * ev.setup.reference.call_seconds(shape)


class CorrectnessGate(ShapeGate):
    gate = Gate.correctness
    holds_device = True
    needs_setup = True

    def outcome(self, shape: Shape | None = None) -> ShapeChecked:
        return ShapeChecked(gate=self.gate, shape=shape.name if shape is not None else None)

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        assert shape is not None and isinstance(outcome, ShapeChecked)
        check_shape(ev, shape, outcome)
        take_trace(ev)


class TimingGate(ShapeGate):
    gate = Gate.timing
    holds_device = True
    needs_setup = True

    def wanted(self, ev: Evaluation) -> bool:
        return ev.settings.timing

    def outcome(self, shape: Shape | None = None) -> ShapeTimed:
        return ShapeTimed(gate=self.gate, shape=shape.name if shape is not None else None)

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        assert shape is not None and isinstance(outcome, ShapeTimed)
        policy = ev.settings.timing_policy or TimingPolicy.for_device(ev.device)
        # the sampler's wall cap stays inside the shape's deadline
        policy = policy.model_copy(update={"max_wall_seconds": min(policy.max_wall_seconds, 0.75 * ev.state.limit)})
        time_shape(ev, shape, outcome, warm_start(ev, policy), profiled=self._profiled(ev))

    @staticmethod
    def _profiled(ev: Evaluation) -> bool:
        """One call per shape whose kernels are listed (the kernel share): on a GPU with the checks
        on, when asked or when the problem requires a minimum kernel share."""
        required = ev.problem.spec.policy.min_kernel_share is not None
        return ev.device == "cuda" and ev.settings.checks and (ev.settings.profile or required)


class ScoreGate(GateStep):
    gate = Gate.score

    def outcome(self, shape: Shape | None = None) -> Scored:
        return Scored(gate=self.gate)

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        assert isinstance(outcome, Scored)
        scored, impossible = score(ev.verdict, ev.problem, ev.settings.timing)
        outcome.figures, outcome.summary = scored.figures, scored.summary
        outcome.detail, outcome.warnings = scored.detail, scored.warnings
        if impossible:
            raise GateFailed(Status.rejected, *impossible)


GATES: tuple[GateStep, ...] = (StaticGate(), BuildGate(), LoadGate(), CorrectnessGate(), TimingGate(), ScoreGate())
