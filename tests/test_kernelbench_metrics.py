"""KernelBench's figures from hand-made outcomes: every rate over all samples, failures included."""

import math
from itertools import combinations

import pytest

from rooftop.score.kernelbench_metrics import (
    SampleOutcome,
    fast_p,
    geomean_speedup,
    pass_at_k,
    pass_at_ks,
    rate,
    summarize,
)


def outcome(problem="a", compiled=True, correct=True, speedup=None):
    return SampleOutcome(problem=problem, compiled=compiled, correct=correct, speedup=speedup)


RUN = [
    outcome("a", speedup=2.5),
    outcome("b", speedup=0.9),
    outcome("c", correct=False),  # compiled, wrong answer
    outcome("d", compiled=False, correct=False),
    outcome("e", speedup=1.2),
    outcome("f", correct=False, compiled=False),  # e.g. a generation naming no problem
    outcome("g", speedup=None),  # correct, but no trusted timing
    outcome("h", correct=False, speedup=3.0),  # a wrong answer's speed never counts
]


def test_rates_divide_by_every_sample():
    assert rate(RUN, "compiled") == 6 / 8
    assert rate(RUN, "correct") == 4 / 8
    assert rate([], "correct") == 0.0


@pytest.mark.parametrize(("p", "expected"), [(0.0, 4), (0.5, 3), (0.8, 3), (1.0, 2), (1.5, 1), (2.0, 1), (2.5, 0)])
def test_fast_p_counts_correct_and_faster_over_all_samples(p, expected):
    assert fast_p(RUN, p) == expected / 8


def test_fast_0_is_the_correctness_rate_even_without_timings():
    assert fast_p(RUN, 0.0) == rate(RUN, "correct")
    untimed = [outcome(speedup=None), outcome(correct=False)]
    assert fast_p(untimed, 0.0) == 0.5 and fast_p(untimed, 0.5) == 0.0


def test_fast_p_is_strictly_greater():
    assert fast_p([outcome(speedup=1.0)], 1.0) == 0.0
    assert fast_p([outcome(speedup=1.0000001)], 1.0) == 1.0


def test_geomean_over_correct_samples_with_a_speedup_only():
    assert geomean_speedup(RUN) == pytest.approx((2.5 * 0.9 * 1.2) ** (1 / 3))
    assert geomean_speedup([outcome(correct=False, speedup=2.0), outcome(speedup=None)]) is None


def _brute_force(n, c, k):
    """The fraction of k-subsets of n samples (c correct) holding at least one correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 3, 3) == 1.0  # fewer wrong samples than k: a correct one is always drawn
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_brute_force(n, c, k)), (n, c, k)


def test_pass_at_k_stays_finite_for_many_samples():
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_ks_averages_over_problems_up_to_the_fewest_samples():
    samples = [outcome("a", correct=True), outcome("a", correct=False), outcome("a", correct=False),
               outcome("b", correct=True), outcome("b", correct=True)]
    got = pass_at_ks(samples)
    assert set(got) == {1, 2}
    assert got[1] == pytest.approx((1 / 3 + 1.0) / 2)
    assert got[2] == pytest.approx(((1 - 1 / 3) + 1.0) / 2)


def test_pass_at_ks_is_empty_with_one_sample_per_problem():
    assert pass_at_ks(RUN) == {}
    assert pass_at_ks([]) == {}


def test_summary_names_are_kernelbenchs():
    figures = summarize(RUN)
    assert list(figures) == ["n", "compile_rate", "correctness_rate", "fast_0", "fast_0.5", "fast_0.8", "fast_1",
                             "fast_1.5", "fast_2", "geomean_speedup", "pass_at_k"]
    assert figures["n"] == 8 and figures["fast_1"] == 2 / 8 and figures["correctness_rate"] == 0.5
