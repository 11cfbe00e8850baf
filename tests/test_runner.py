"""The gate runner and the gates, in-process against a fake child: the order, the one set-up, the
deadlines, where a failure is written, and what each gate makes of the child's replies. No
process is started here; the paths through a real child are tested in test_pipeline.py."""

from __future__ import annotations

import math
import os
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from conftest import FIXTURES

from rooftop.pipeline.evaluate import prepare
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.gates import BuildGate, GateStep, LoadGate, ScoreGate
from rooftop.pipeline.trusted.outcomes import GateOutcome, Scored, ShapeChecked
from rooftop.pipeline.trusted.runner import GateRunner
from rooftop.pipeline.trusted.setup import hand_over
from rooftop.pipeline.wire import BuildReply, Failure, JobReply, LoadReply
from rooftop.problem.loader import load_problem
from rooftop.problem.spec import Shape
from rooftop.solution.loader import load_solution
from rooftop.verdict import Gate, GateFailed, SeedCheck, Status
from rooftop.vocabulary import GateFinished, GateStarted, Settings, ShapeDone


def _evaluation(**settings: Any) -> tuple[Evaluation, list[Any]]:
    problem = load_problem(FIXTURES / "problems" / "scale")
    solution = load_solution(FIXTURES / "solutions" / "good.py")
    chosen = Settings(device="cpu", **settings)
    shapes = problem.spec.select("all")
    events: list[Any] = []
    return prepare(problem, solution, chosen, "cpu", "all", shapes, events.append, None), events


class Step(GateStep):
    """A gate that notes when it ran (and with what deadline), and fails when told to."""

    def __init__(self, gate: Gate, log: list[str], *, per_shape: bool = False, setup: bool = False,
                 limit: float | None = None, fails: BaseException | None = None) -> None:
        self.gate, self.log, self.limit, self.fails = gate, log, limit, fails  # type: ignore[misc]
        self.per_shape, self.needs_setup = per_shape, setup  # type: ignore[misc]

    def timeout(self, ev: Evaluation, shape: Shape | None = None) -> float | None:
        return self.limit

    def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
        self.log.append(f"{self.gate.value}:{shape.name if shape else ''}:{ev.state.limit:g}")
        if self.fails is not None:
            raise self.fails


def _noting_setup(log: list[str], fails: BaseException | None = None):
    def setup(ev: Evaluation) -> None:
        log.append(f"setup:{ev.state.gate.value}:{ev.state.limit:g}")
        if fails is not None:
            raise fails
    return setup


def test_the_gates_run_in_order_and_the_set_up_once_before_the_first_that_needs_it():
    ev, events = _evaluation()
    log: list[str] = []
    gates = (Step(Gate.static, log), Step(Gate.build, log, setup=True, limit=7.0),
             Step(Gate.load, log, setup=True), Step(Gate.correctness, log, per_shape=True, setup=True, limit=3.0))
    GateRunner(gates, setup=_noting_setup(log)).run(ev)
    shapes = [s.name for s in ev.shapes]
    assert log == ["static::0", "setup:build:7", "build::7", "load::0",
                   *[f"correctness:{name}:3" for name in shapes]]
    assert ev.verdict.status is Status.correct and ev.verdict.failed_gate is None
    assert [r.gate for r in ev.verdict.gates] == [Gate.static, Gate.build, Gate.load, Gate.correctness]
    assert [e.gate for e in events if isinstance(e, GateStarted)] == [g.gate for g in gates]
    assert [e.shape for e in events if isinstance(e, ShapeDone)] == shapes
    assert all(f"gate_{g.gate.value}" in ev.phases for g in gates)


def test_a_statically_refused_solution_never_gets_a_set_up():
    ev, _ = _evaluation()
    log: list[str] = []
    refused = GateFailed(Status.rejected, "[forbidden] torch.matmul")
    GateRunner((Step(Gate.static, log, fails=refused), Step(Gate.build, log, setup=True)),
               setup=_noting_setup(log)).run(ev)
    assert log == ["static::0"]
    assert ev.verdict.status is Status.rejected and ev.verdict.failed_gate is Gate.static
    assert ev.verdict.messages == ["[forbidden] torch.matmul"]
    assert [(r.gate, r.ok) for r in ev.verdict.gates] == [(Gate.static, False)]


def test_a_failed_set_up_is_the_failure_of_the_gate_it_ran_under():
    ev, events = _evaluation()
    log: list[str] = []
    lost = GateFailed(None, "exited with code 3", "Traceback ...", lost="crash")
    GateRunner((Step(Gate.static, log), Step(Gate.build, log, setup=True, limit=5.0), Step(Gate.load, log)),
               setup=_noting_setup(log, fails=lost)).run(ev)
    assert log == ["static::0", "setup:build:5"]  # neither the build gate's own work nor a later gate ran
    assert ev.verdict.failed_gate is Gate.build and ev.verdict.status is Status.compile_error
    assert ev.verdict.messages[0].startswith("the solution's process exited with code 3 during the build gate")
    [finished] = [e for e in events if isinstance(e, GateFinished) and not e.ok]
    assert finished.gate is Gate.build and finished.status is Status.compile_error


def test_a_timeout_names_the_gate_the_shape_and_the_limit():
    ev, _ = _evaluation()
    log: list[str] = []
    late = GateFailed(Status.timeout, lost="timeout")
    GateRunner((Step(Gate.timing, log, per_shape=True, limit=2.5, fails=late),), setup=_noting_setup(log)).run(ev)
    first = ev.shapes[0].name
    assert ev.verdict.failed_gate is Gate.timing and ev.verdict.status is Status.timeout
    assert ev.verdict.messages == [f"the timing gate ran past its 2.5 s limit (shape '{first}'); the child was killed"]
    assert log == [f"timing:{first}:2.5"]  # the first shape's failure ends the gate


def test_the_trusted_side_running_out_of_memory_is_an_internal_error_not_the_candidate_s():
    ev, _ = _evaluation()
    log: list[str] = []
    GateRunner((Step(Gate.load, log, fails=MemoryError("cannot allocate 8 GiB")),)).run(ev)
    assert ev.verdict.status is Status.internal_error and ev.verdict.failed_gate is Gate.load
    assert ev.verdict.messages[0].startswith("[memory] the trusted side ran out of memory")


def test_rooftop_s_own_bugs_are_raised_not_written_as_a_verdict():
    ev, _ = _evaluation()
    with pytest.raises(KeyError):
        GateRunner((Step(Gate.load, [], fails=KeyError("bug")),)).run(ev)


def test_a_gate_without_a_child_to_wait_for_has_no_deadline():
    ev, _ = _evaluation()
    seen: list[float] = []

    class Look(GateStep):
        gate: ClassVar[Gate] = Gate.score

        def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
            seen.append(ev.state.deadline)

    GateRunner((Look(),)).run(ev)
    assert seen == [math.inf]


class FakeChild:
    """A child that answers each request type with the reply it was given, noting the requests."""

    def __init__(self, *replies: Any) -> None:
        self.replies = {type(r).__name__.removesuffix("Reply"): r for r in replies}
        self.requests: list[str] = []
        self.proc = SimpleNamespace(pid=os.getpid())  # the load probe counts this process as the child

    def request(self, request: Any, reply_type: type, deadline: float) -> tuple[Any, float]:
        self.requests.append(type(request).__name__)
        return self.replies[reply_type.__name__.removesuffix("Reply")], 0.01


def test_the_build_gate_records_what_the_child_built():
    ev, _ = _evaluation()
    ev.setup.child = FakeChild(BuildReply(seconds=12.5, cached=True))  # type: ignore[assignment]
    gate = BuildGate()
    gate.run(ev, outcome := gate.outcome())
    assert (outcome.gate, outcome.seconds, outcome.cached) == (Gate.build, 12.5, True)
    assert ev.phases["build"] == 12.5 and ev.setup.child.requests == ["BuildRequest"]  # type: ignore[union-attr]


def test_a_child_s_failure_reply_ends_the_gate_with_its_status_and_messages():
    ev, _ = _evaluation()
    ev.setup.child = FakeChild(BuildReply(failure=Failure(status=Status.compile_error,  # type: ignore[assignment]
                                                          messages=["nvcc: error"], cached=False)))
    with pytest.raises(GateFailed) as failed:
        BuildGate().run(ev, BuildGate().outcome())
    assert failed.value.status is Status.compile_error and failed.value.messages == ["nvcc: error"]
    assert failed.value.cached is False


def test_the_load_gate_keeps_the_child_s_start_up_phases_and_samples_the_cpu_s_load():
    ev, _ = _evaluation()
    ev.setup.child = FakeChild(LoadReply(seconds=0.4, detail="ModelNew", phases={"imports": 3.5}))  # type: ignore
    ev.setup.reference = object()  # type: ignore[assignment]
    gate = LoadGate()
    gate.run(ev, outcome := gate.outcome())
    assert outcome.detail == "ModelNew" and outcome.seconds == 0.4
    assert ev.phases["child_imports"] == 3.5 and ev.setup.cpu_load is not None


def test_the_hand_over_takes_the_child_s_word_on_its_timer_and_tracer_into_the_verdict():
    ev, _ = _evaluation(timing=False)
    environment = ev.verdict.environment  # none yet: the child describes its own
    ev.setup.child = FakeChild(JobReply(environment=None))  # type: ignore[assignment]
    hand_over(ev)
    assert ev.verdict.environment is environment and ev.verdict.warnings == []  # a build-stage child says nothing

    from rooftop.environment import parent_environment

    described = parent_environment("cpu", ev.solution, ran=True)
    ev.setup.child = FakeChild(JobReply(environment=described, unsealed="no memfd_create"))  # type: ignore
    hand_over(ev)
    assert ev.verdict.environment == described
    assert ev.verdict.warnings == ["[sealed] the timer could not be sealed in the evaluation child (no memfd_create); "
                                   "its times rest on the trusted wall floor alone"]
    assert ev.trace.untraced == ""


def test_the_score_gate_scores_correct_shapes_without_timing():
    ev, _ = _evaluation(timing=False)
    for result in ev.verdict.shapes:
        result.correct = True
    gate = ScoreGate()
    gate.run(ev, outcome := gate.outcome())
    assert isinstance(outcome, Scored) and outcome.summary is not None and outcome.summary.correct_shapes == 2
    assert set(outcome.figures) == {s.name for s in ev.shapes} and outcome.detail == "CPU: no roofline"
    assert ev.verdict.summary.correct_shapes == 0  # the gate fills its outcome; the runner writes the verdict


class ComputingChild(FakeChild):
    """A child whose every timed call returns the reference's own output on its seed's inputs
    (`wrong` adds 1 to it), reports `seconds` for it and takes `overhead` more per call on the
    trusted wall clock; no-op calls (the harness's own cost) report nothing and take `overhead`."""

    def __init__(self, ev: Evaluation, seconds: float, overhead: float = 1e-3, wrong: bool = False) -> None:
        super().__init__()
        from rooftop.pipeline.trusted.reference import TrustedReference

        self.reference = TrustedReference(ev.job.problem, "cpu", ev.job.weights_seed)
        self.shapes = {s.name: s for s in ev.shapes}
        self.seconds, self.overhead, self.wrong = seconds, overhead, wrong

    def request(self, request: Any, reply_type: type, deadline: float) -> tuple[Any, float]:
        from rooftop.check.probe import probe_outputs
        from rooftop.pipeline.wire import BlockReply, CallReply

        self.requests.append(type(request).__name__)
        replies = []
        for call in request.calls:
            if call.noop:
                replies.append(CallReply(seconds=0.0))
                continue
            shape = self.shapes[call.shape]
            out = self.reference.run(shape, self.reference.inputs(shape, call.seed))
            replies.append(CallReply(seconds=self.seconds, outputs=probe_outputs(out + 1 if self.wrong else out)))
        wall = sum(r.seconds or 0.0 for r in replies) + self.overhead * len(replies)
        return BlockReply(calls=replies), wall


def _timing_ready(**settings: Any) -> Evaluation:
    """An evaluation at its timing gate: the reference set up, the harness's cost measured."""
    from rooftop.measure.stopping import TimingPolicy
    from rooftop.pipeline.trusted.reference import TrustedReference

    policy = TimingPolicy(warmup_calls=1, warmup_seconds=0.0, min_samples=5, min_seconds=0.01,
                          min_wall_seconds=0.05, target_rse=None, max_wall_seconds=10.0)
    ev, _ = _evaluation(timing_policy=policy, **settings)
    ev.setup.reference = TrustedReference(ev.job.problem, "cpu", ev.job.weights_seed)
    ev.state.gate, ev.state.limit, ev.state.deadline = Gate.timing, 30.0, math.inf
    return ev


def test_the_timing_gate_pairs_the_child_s_reports_with_the_reference_s_own_times():
    from rooftop.pipeline.trusted.gates import TimingGate

    ev = _timing_ready()
    ev.setup.child = ComputingChild(ev, seconds=2e-3)  # type: ignore[assignment]
    shape = ev.shapes[0]
    gate = TimingGate()
    gate.run(ev, result := gate.outcome(shape), shape)
    assert result.candidate is not None and result.reference is not None
    assert result.candidate.median == pytest.approx(2e-3)  # the child's word, on every sample
    assert result.candidate.n >= 5 and result.reference.n >= 5
    assert result.timed_calls >= result.candidate.n and result.timed_checks >= result.reference.n
    assert "BlockRequest" in ev.setup.child.requests  # type: ignore[union-attr]


def test_the_timing_gate_finds_a_child_that_answers_its_timed_calls_wrongly():
    from rooftop.pipeline.trusted.gates import TimingGate

    ev = _timing_ready()
    ev.setup.child = ComputingChild(ev, seconds=1e-4, wrong=True)  # type: ignore[assignment]
    with pytest.raises(GateFailed) as failed:
        TimingGate().run(ev, TimingGate().outcome(ev.shapes[0]), ev.shapes[0])
    assert failed.value.status is Status.incorrect and "[timed-output]" in failed.value.messages[0]


def test_a_failing_gate_keeps_in_the_verdict_what_it_found_before_it_failed():
    """The runner writes a gate's typed outcomes into the verdict whether it passed or failed: the
    seeds checked before the wrong one, and the warnings raised, stay with the failure."""
    ev, _ = _evaluation()

    class Checks(GateStep):
        gate: ClassVar[Gate] = Gate.correctness
        per_shape = True

        def outcome(self, shape: Shape | None = None) -> ShapeChecked:
            return ShapeChecked(gate=self.gate, shape=shape.name if shape else None)

        def run(self, ev: Evaluation, outcome: GateOutcome, shape: Shape | None = None) -> None:
            assert isinstance(outcome, ShapeChecked) and shape is not None
            outcome.checks.append(SeedCheck(seed=1, ok=True))
            outcome.warnings.append(f"[note] {shape.name}")
            if shape is ev.shapes[-1]:
                outcome.checks.append(SeedCheck(seed=2, ok=False, message="off by one"))
                outcome.correct = False
                raise GateFailed(Status.incorrect, "seed 2: off by one")
            outcome.correct = True

    GateRunner((Checks(),)).run(ev)
    *passed, failed = ev.verdict.shapes
    assert all(r.correct and [c.seed for c in r.checks] == [1] for r in passed)
    assert failed.correct is False and [(c.seed, c.ok) for c in failed.checks] == [(1, True), (2, False)]
    assert ev.verdict.warnings == [f"[note] {s.name}" for s in ev.shapes]
    assert [(r.gate, r.ok, r.detail) for r in ev.verdict.gates] == [(Gate.correctness, False, "seed 2: off by one")]
    assert ev.verdict.status is Status.incorrect
