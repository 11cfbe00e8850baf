"""The between-process spread of a speedup, and the interval widened by it."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rooftop.measure.spread import DEFAULT_GPU_SPREAD, spread_of, widen


def test_self_checks_all_at_one_have_no_spread_and_one_run_is_not_enough():
    assert spread_of([1.0, 1.0, 1.0]) == 0.0
    assert spread_of([0.98]) is None
    assert spread_of([]) is None


def test_a_bias_counts_as_much_as_a_scatter():
    biased = spread_of([0.99, 0.99, 0.99])
    scattered = spread_of([0.99, 1 / 0.99, 0.99])
    assert biased is not None and scattered is not None
    assert biased == pytest.approx(scattered)
    assert biased > 0.01 * 4  # t(2 degrees of freedom) = 4.3 times the 1 % it strays


def test_more_runs_of_the_same_scatter_give_a_narrower_spread():
    three = spread_of([0.98, 1.02, 1.0])
    six = spread_of([0.98, 1.02, 1.0] * 2)
    assert three is not None and six is not None and six < three


def test_the_transposed_convolutions_spread_admits_what_they_measured():
    """Fresh processes of one reference ran 9.3 to 14.5 ms: a self-check's 0.77 lies inside."""
    runs = [10.8 / 14.5, 14.5 / 9.4, 9.4 / 13.3, 13.3 / 9.6]
    spread = spread_of(runs)
    assert spread is not None
    low, high = widen(0.767, 0.724, 0.913, spread)
    assert low is not None and high is not None and low <= 1.0 <= high


def test_widening_adds_in_quadrature_in_log_space_and_keeps_the_speedup_inside():
    low, high = widen(1.0, 0.999, 1.001, DEFAULT_GPU_SPREAD)
    assert low is not None and high is not None
    between = math.log1p(DEFAULT_GPU_SPREAD)
    assert math.log(high) == pytest.approx(math.hypot(math.log(1.001), between))
    assert -math.log(low) == pytest.approx(math.hypot(math.log(1 / 0.999), between))
    assert low < 0.999 and high > 1.001


def test_a_precise_self_check_a_fraction_of_a_percent_off_now_holds_one():
    """37_FrobeniusNorm on an H200: 0.99978 [0.99959, 0.99987] excluded 1.0 by 0.013 %."""
    low, high = widen(0.99978, 0.99959, 0.99987, DEFAULT_GPU_SPREAD)
    assert low is not None and high is not None and low <= 1.0 <= high
    assert high < 1.003  # still says the ratio is within a few tenths of a percent


def test_ends_never_measured_stay_unmeasured():
    assert widen(1.2, None, None, 0.01) == (None, None)


def _result(ratio: float) -> Any:
    from rooftop.measure.measurement import TimingStats
    from rooftop.verdict import ShapeResult

    reference = [1e-3 * (1 + 1e-4 * (i % 7)) for i in range(60)]
    candidate = [r / ratio for r in reference]
    return ShapeResult(shape="s", split="visible", params={"n": 1},
                       candidate=TimingStats(clock="cuda_event", samples=candidate),
                       reference=TimingStats(clock="cuda_event", samples=reference))


def test_a_gpu_speedup_takes_the_default_spread_and_says_so():
    from rooftop.pipeline.trusted.scoring import set_speedup

    result = _result(0.9998)
    set_speedup(result, DEFAULT_GPU_SPREAD, "default")
    assert result.speedup == pytest.approx(0.9998)
    assert result.speedup_low is not None and result.speedup_high is not None
    assert result.speedup_low <= 1.0 <= result.speedup_high
    assert (result.speedup_spread, result.spread_source) == (DEFAULT_GPU_SPREAD, "default")
    set_speedup(result, None, "")
    assert result.speedup_spread is None and result.spread_source == ""
    assert result.speedup_high is not None and result.speedup_high < 1.0  # the paired interval alone excludes 1.0


def test_stored_self_checks_replace_the_default_spread():
    from rooftop.measure.baselines import BaselineRecord, Platform
    from rooftop.pipeline.trusted.scoring import apply_baselines, set_speedup
    from rooftop.verdict import Verdict

    result = _result(0.77)
    set_speedup(result, DEFAULT_GPU_SPREAD, "default")
    assert result.speedup_high is not None and result.speedup_high < 1.0
    platform = Platform(device="cuda", device_name="NVIDIA H200", torch="2.11.0")
    record = BaselineRecord(platform=platform, problem="p", problem_version=1, shape="s", params={"n": 1},
                            kind="self", speedups=[10.8 / 14.5, 14.5 / 9.4, 9.4 / 13.3])
    verdict = Verdict(problem="p", problem_version=1, solution="x.py", source_hash="0", status="correct",
                      reward=None, shapes=[result])
    apply_baselines(verdict, [record])
    assert result.spread_source == "3 self-checks in fresh processes"
    assert result.speedup_low is not None and result.speedup_high is not None
    assert result.speedup_low <= 1.0 <= result.speedup_high
    assert "self" not in result.baselines and "self" not in result.speedups


@pytest.mark.parametrize("record_traced, applied", [(True, True), (None, False), (False, False)])
def test_a_gpu_baseline_applies_only_when_timed_under_the_tracer_as_the_candidate(record_traced, applied):
    from rooftop.measure.baselines import BaselineRecord, Platform
    from rooftop.measure.measurement import TimingStats
    from rooftop.pipeline.trusted.scoring import apply_baselines
    from rooftop.verdict import Verdict

    result = _result(1.0)
    platform = Platform(device="cuda", device_name="NVIDIA H200", torch="2.11.0")
    record = BaselineRecord(platform=platform, problem="p", problem_version=1, shape="s", params={"n": 1},
                            kind="compile", stats=TimingStats(clock="cuda_event", samples=[2e-3] * 8),
                            traced=record_traced)
    verdict = Verdict(problem="p", problem_version=1, solution="x.py", source_hash="0", status="correct",
                      reward=None, shapes=[result], traced_calls=64)
    apply_baselines(verdict, [record])
    assert ("compile" in result.speedups) is applied
    warned = any(w.startswith("[baselines]") and "without the kernel tracer" in w for w in verdict.warnings)
    assert warned is not applied


def test_the_shape_table_says_what_its_intervals_hold():
    from rooftop.cli.render import spread_notes
    from rooftop.pipeline.trusted.scoring import set_speedup
    from rooftop.verdict import Verdict

    result = _result(1.0)
    verdict = Verdict(problem="p", problem_version=1, solution="x.py", source_hash="0", status="correct",
                      reward=None, shapes=[result])
    set_speedup(result, None, "")
    assert ["no spread between processes" in n for n in spread_notes(verdict)] == [True]
    set_speedup(result, DEFAULT_GPU_SPREAD, "default")
    assert spread_notes(verdict) == ["speedup intervals include ±0.25% between processes (GPU default; "
                                     "`rooftop baselines --kinds self` measures this problem's)"]


def test_a_host_bound_shape_takes_the_host_bound_default_and_the_table_says_why():
    """KernelBench level 3's launch-bound networks self-checked at 0.82 to 1.57 with paired intervals
    a few percent wide: the GPU default's ±0.25 % said nothing true about them."""
    from rooftop.cli.render import spread_notes
    from rooftop.measure.spread import HOST_BOUND_SPREAD, default_spread
    from rooftop.pipeline.trusted.scoring import set_speedup
    from rooftop.verdict import Verdict

    assert default_spread([]) == (DEFAULT_GPU_SPREAD, "default")
    assert default_spread(["clocks"]) == (DEFAULT_GPU_SPREAD, "default")
    assert default_spread(["host-bound"]) == (HOST_BOUND_SPREAD, "host-bound default")
    result = _result(1.12)
    set_speedup(result, *default_spread([]))
    assert result.speedup_low is not None and result.speedup_low > 1.0  # the GPU default excludes 1.0
    set_speedup(result, *default_spread(["host-bound"]))
    assert result.speedup_low is not None and result.speedup_low <= 1.0 <= result.speedup_high
    verdict = Verdict(problem="p", problem_version=1, solution="x.py", source_hash="0", status="correct",
                      reward=None, shapes=[result, _result(1.0)])
    set_speedup(verdict.shapes[1], *default_spread([]))
    notes = spread_notes(verdict)
    assert any("±22.00%" in n and "host-bound shape" in n for n in notes)
    assert any("±0.25%" in n and "GPU default" in n for n in notes)


def test_scoring_gives_a_flagged_shape_the_host_bound_default():
    from rooftop.measure.spread import HOST_BOUND_SPREAD
    from rooftop.pipeline.trusted.outcomes import assemble
    from rooftop.pipeline.trusted.scoring import score
    from rooftop.problem.registry import resolve
    from rooftop.verdict import Environment, Gate, Verdict

    bound, plain = _result(1.1), _result(1.1)
    bound.shape, plain.shape = "tiny", "tiny_odd"
    bound.flags = ["host-bound"]
    verdict = Verdict(problem="p", problem_version=1, solution="x.py", source_hash="0", status="correct",
                      reward=None, shapes=[bound, plain],
                      environment=Environment(device="cuda", device_name="x", mode="gpu", python="3", torch="2",
                                              platform="linux", hostname="h", rooftop="0"))
    scored, _ = score(verdict, resolve("examples/softmax"), timed=True)
    assert bound.speedup_spread is None  # the gate's figures reach the verdict through `assemble` alone
    assemble(verdict, Gate.score, [scored], 0.0)
    assert (bound.speedup_spread, bound.spread_source) == (HOST_BOUND_SPREAD, "host-bound default")
    assert (plain.speedup_spread, plain.spread_source) == (DEFAULT_GPU_SPREAD, "default")
