"""The named reward functions: a timing that was not a measurement never pays better than one that was."""

from __future__ import annotations

import pytest

from rooftop.measure.measurement import TimingStats
from rooftop.pipeline.trusted.scoring import summarize
from rooftop.score.reward import REWARDS, compute_reward, unmeasured
from rooftop.verdict import ShapeResult, Status, Verdict


def shape(name: str, speedup: float | None, flags: tuple[str, ...] = (), timed: bool = True) -> ShapeResult:
    stats = TimingStats(clock="cpu_perf_counter", samples=[1e-3] * 10, stopped_by="min_samples") if timed else None
    return ShapeResult(shape=name, split="visible", params={}, correct=True, candidate=stats, reference=stats,
                       speedup=speedup if timed else None, flags=list(flags))


def verdict(*shapes: ShapeResult) -> Verdict:
    v = Verdict(status=Status.correct, reward=None, problem="p", problem_version=1, solution="s.py", source_hash="h",
                shapes=list(shapes))
    summarize(v)
    return v


@pytest.mark.parametrize("name", REWARDS.names())
def test_a_contended_slow_kernel_never_scores_above_the_same_kernel_measured(name):
    """pytorch_softmax.py: 0.39x measured on an idle machine; on a busy one its shape was flagged
    `contention`, and the reward once read that as no speedup at all (0.00 against -0.62)."""
    measured = compute_reward(verdict(shape("s", 0.39)), name)
    contended = compute_reward(verdict(shape("s", 0.297, ("contention",))), name)
    slowest = compute_reward(verdict(shape("s", 1e-9)), name)
    assert measured is not None and contended is not None and slowest is not None
    assert contended <= slowest <= measured
    # and never below a failure: a correct kernel still beats a broken one
    assert contended > compute_reward(verdict(shape("s", 0.39)).model_copy(update={"status": Status.incorrect}), name)


@pytest.mark.parametrize("name", REWARDS.names())
def test_one_contended_shape_leaves_the_whole_speedup_unmeasured(name):
    """The measured shapes' mean alone would flatter a kernel that is slow on the contended one."""
    partly = verdict(shape("fast", 3.0), shape("slow", 0.1, ("contention",)))
    both = verdict(shape("fast", 3.0), shape("slow", 0.1))
    assert unmeasured(partly) == {"slow": "machine shared"} and unmeasured(both) == {}
    assert compute_reward(partly, name) <= compute_reward(both, name)
    assert compute_reward(partly, name) == compute_reward(verdict(shape("s", 0.5, ("contention",))), name)


def test_the_rule_per_reward_function():
    contended = verdict(shape("s", 0.297, ("contention",)))
    assert compute_reward(contended) == -1.0 and compute_reward(contended, "kevin") == pytest.approx(0.3)
    slow = verdict(shape("s", 0.39))
    assert compute_reward(slow) == pytest.approx(-0.61) and compute_reward(slow, "kevin") == pytest.approx(0.69)
    # timed without a paired speedup is no measurement either
    assert compute_reward(verdict(shape("a", 2.0), shape("b", None))) == -1.0


def test_timing_off_is_neutral_for_every_candidate_alike():
    off = verdict(shape("s", None, timed=False))
    assert unmeasured(off) == {}
    assert compute_reward(off) == 0.0 and compute_reward(off, "kevin") == pytest.approx(0.3)
