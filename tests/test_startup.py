"""What a verdict's wall time is spent on: the child started ahead of its evaluation, the phases the
verdict keeps, and the events cross-check held to the profiled call's own time."""

import json
import subprocess
import sys
from types import SimpleNamespace

from conftest import FIXTURES, fixture_problem, run

from rooftop.measure.measurement import TimingStats
from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline import spawn
from rooftop.pipeline.timing import cross_check
from rooftop.solution.loader import load_solution
from rooftop.verdict import ShapeResult


def test_a_child_started_ahead_is_the_one_its_evaluation_takes_and_others_are_left():
    problem = fixture_problem("scale")
    good, other = load_solution(FIXTURES / "solutions" / "good.py"), load_solution(FIXTURES / "solutions" / "hang.py")
    spawn.prestart(problem, good, "cpu", "auto")
    spawn.prestart(problem, other, "cpu", "auto")
    [ahead_good, ahead_other] = spawn._ahead
    v = run("scale", "good.py", timing=False)
    assert v.status.value == "correct"
    assert spawn._ahead == [ahead_other]  # taken: the one for this solution, not the other
    assert ahead_good.session.proc.poll() is not None  # and ended with its evaluation
    assert v.phases["child_start"] < v.phases["gate_build"] + 1e-9
    spawn._stop_unclaimed()  # what the exit handler does
    assert spawn._ahead == [] and ahead_other.session.proc.poll() is not None
    assert not ahead_other.scratch.exists()


def test_the_verdict_keeps_its_phases_and_verbose_prints_them(tmp_path):
    args = [sys.executable, "-m", "rooftop.cli.main", "eval", str(FIXTURES / "problems" / "scale"),
            str(FIXTURES / "solutions" / "good.py"), "--device", "cpu", "--no-timing", "--db", str(tmp_path / "r.db")]
    verdict = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=300).stdout)
    phases = verdict["phases"]
    for name in ("check_problem", "trusted_setup", "child_start", "child_interpreter_and_imports", "inputs",
                 "reference", "gate_build", "gate_load", "gate_correctness"):
        assert phases[name] >= 0, name
    assert phases["child_interpreter_and_imports"] > 0  # the child's own age when it said hello
    assert verdict["inputs"] == ("made on cpu by both sides from each call's seed; bit-identical at the sampled "
                                 "positions of all 3 checked calls")
    shown = subprocess.run([*args, "-v"], capture_output=True, text=True, timeout=300).stdout
    assert "from this process's start to the evaluation" in shown
    assert "child start" in shown and "gate correctness" in shown


def _result(median: float, kernels: float | None, events: float | None) -> ShapeResult:
    result = ShapeResult(shape="s", split="visible", params={})
    result.candidate = TimingStats(clock="cuda_event", samples=[median] * 20, stopped_by="precision")
    result.profiled_kernel_seconds, result.profiled_event_seconds = kernels, events
    return result


def test_the_events_cross_check_holds_kernels_to_the_same_calls_event_time():
    """Tracing slows each kernel a little: a profiled call's kernels are compared with that call's
    own event time, so an honest kernel 25 % over the untraced median is not accused, while
    kernels that outlast their own call's events still are."""
    sampler = SimpleNamespace(many_dropped=False, dropped=0, policy=TimingPolicy(), max_clock_mhz=None)
    sampling = SimpleNamespace(samplers=[sampler])
    shape = SimpleNamespace(name="s")

    def flags(result: ShapeResult) -> list[str]:
        ev = SimpleNamespace(verdict=SimpleNamespace(warnings=[]))
        cross_check(ev, shape, result, sampling)
        return result.flags

    assert flags(_result(100e-6, kernels=125e-6, events=130e-6)) == []
    assert flags(_result(100e-6, kernels=125e-6, events=60e-6)) == ["events"]
    assert flags(_result(100e-6, kernels=125e-6, events=None)) == []  # no event time: nothing to compare
