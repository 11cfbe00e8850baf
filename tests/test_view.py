"""The agent's observation of a verdict: a speedup the reward ignores is shown as ignored."""

from __future__ import annotations

import pytest

from rooftop.env.view import agent_view, render
from rooftop.measure.measurement import TimingStats
from rooftop.pipeline.trusted.scoring import summarize
from rooftop.score.reward import compute_reward
from rooftop.verdict import ShapeResult, Status, Verdict


def verdict(*flags: list[str], split: str = "visible") -> Verdict:
    stats = TimingStats(clock="cpu_perf_counter", samples=[1e-3] * 10)
    shapes = [ShapeResult(shape=f"s{i}", split=split if i else "visible", params={"N": 8 * (i + 1)}, correct=True,
                          candidate=stats, reference=stats, speedup=0.297, flags=f) for i, f in enumerate(flags)]
    v = Verdict(status=Status.correct, reward=None, problem="p", problem_version=1, solution="s.py", source_hash="h",
                shapes=shapes)
    summarize(v)
    return v


def observation(v: Verdict, reward: str = "kevin", graded: bool = False) -> str:
    return render(agent_view(v, compute_reward(v, reward) or 0.0, graded=graded))


def test_a_contended_shape_says_its_speedup_is_ignored_by_the_reward():
    """pytorch_softmax.py on a busy CPU: `speedup=0.297x` with a kevin reward of 0.3, and nothing
    said about the speedup being ignored."""
    text = observation(verdict(["contention"]))
    assert "reward: 0.3\n" in text
    assert "speedup=0.297x (not measured: machine shared; ignored by the reward)" in text
    assert "not measured on 1 of 1 shapes (machine shared); ignored by the reward" in text


def test_a_measured_speedup_is_shown_plainly():
    text = observation(verdict([]))
    assert "speedup=0.297x," in text or text.rstrip().endswith("speedup=0.297x")
    assert "not measured" not in text and "ignored" not in text
    assert "speedup over the reference (geometric mean): 0.297x" in text


def test_one_contended_shape_of_two_leaves_the_mean_shown_but_unused():
    text = observation(verdict([], ["contention"]), reward="default")
    assert "reward: -1\n" in text
    assert ("speedup over the reference (geometric mean): 0.297x over the measured shapes, not measured on 1 of 2 "
            "shapes (machine shared); ignored by the reward") in text


def test_a_graded_run_counts_unmeasured_held_out_shapes_without_naming_them():
    text = observation(verdict([], ["contention"], split="held_out"), graded=True)
    assert "s1" not in text
    assert "held-out shapes: 1/1 correct, speedup (not measured on 1: ignored by the reward)" in text
    assert "not measured on 1 of 2 shapes" in text


@pytest.mark.parametrize("status", [Status.incorrect, Status.timeout])
def test_a_failed_verdict_says_nothing_of_an_ignored_speedup(status):
    v = verdict(["contention"]).model_copy(update={"status": status})
    assert agent_view(v, -2.0).speedup_ignored is None
