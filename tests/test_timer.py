import math
import random

import pytest

from rooftop.measure.measurement import (
    MIN_INTERVAL_SAMPLES,
    TimingStats,
    median_ranks,
    ratio_interval,
    relative_standard_error,
)
from rooftop.measure.stopping import Sampler, TimingPolicy


class FakeWall:
    """A wall clock the test moves by hand: stopping rules become deterministic."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_statistics_from_raw_samples():
    stats = TimingStats(clock="fake", samples=[1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats.n == 5 and stats.median == 3.0 and stats.min == 1.0 and stats.max == 100.0
    assert stats.iqr == 2.0  # robust to the outlier
    assert TimingStats.model_validate_json(stats.model_dump_json()).median == 3.0


def test_stops_at_the_minimums_without_a_precision_rule():
    policy = TimingPolicy(warmup_calls=2, warmup_seconds=0, min_samples=5, max_samples=100, min_seconds=1.0,
                          target_rse=None)
    sampler = Sampler(policy, FakeWall())
    kinds = []
    while sampler.stopped_by is None:
        if sampler.warming:
            sampler.warmed()
            kinds.append("warm")
        else:
            sampler.add(0.3)
            kinds.append("timed")
    assert kinds == ["warm", "warm"] + ["timed"] * 5  # 4 x 0.3 < 1.0 and min_samples rules anyway
    stats = sampler.stats("fake")
    assert stats.n == 5 and stats.stopped_by == "min_samples" and stats.warmup_calls == 2
    fast = Sampler(policy, FakeWall())
    while fast.stopped_by is None:
        fast.warmed() if fast.warming else fast.add(0.001)
    assert fast.stats("fake").n == 100 and fast.stopped_by == "max_samples"


def test_warmup_lasts_its_seconds_and_the_wall_limit_stops_sampling():
    wall = FakeWall()
    policy = TimingPolicy(warmup_calls=1, warmup_seconds=0.5, min_samples=3, max_samples=1000,
                          min_seconds=100.0, max_wall_seconds=10.0)
    sampler = Sampler(policy, wall)
    sampler.warmed()
    assert sampler.warming  # one call made, but 0.5 s of warm-up not yet spent
    wall.now = 0.6
    assert not sampler.warming
    for _ in range(3):
        sampler.add(0.01)
    assert sampler.stopped_by is None
    wall.now = 10.5
    sampler.add(0.01)
    assert sampler.stopped_by == "max_wall_seconds"


def _binomial_below(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) < k)."""
    return sum(math.comb(n, i) for i in range(k)) / 2**n


@pytest.mark.parametrize("n", [6, 7, 10, 11, 20, 37, 100, 250, 1000, 2001, 5000])
def test_median_interval_covers_with_95_percent_and_no_wider_than_needed(n):
    lo, hi = median_ranks(n)
    assert hi == n - 1 - lo  # symmetric ranks
    # the true median lies outside [x[lo], x[hi]] only if fewer than lo+1 samples fall below it
    # (or, symmetrically, above it)
    miss = 2 * _binomial_below(n, lo + 1)
    assert miss <= 0.05
    assert 2 * _binomial_below(n, lo + 2) > 0.05 or lo + 1 >= n // 2  # one rank tighter would not do


def test_median_ranks_equal_the_exact_binomial_ranks_for_every_sample_count():
    """The floating-point sum over the binomial's central terms gives the ranks exact integer
    arithmetic gives, for every n the sampler can reach."""
    for n in range(1, 1201):
        below, lower, term = 0, 0, 1  # term: comb(n, lower); the tail is 2.5 %, 1/40
        while lower < n // 2 and 40 * (below + term) <= 2**n:
            below, lower = below + term, lower + 1
            term = term * (n - lower + 1) // lower
        lower = max(lower, 1)
        assert median_ranks(n) == (lower - 1, n - lower), n


def test_median_interval_against_the_textbook_table():
    assert median_ranks(10) == (1, 8)  # 2nd and 9th of 10
    assert median_ranks(20) == (5, 14)  # 6th and 15th of 20
    assert median_ranks(100) == (39, 60)  # 40th and 61st of 100


def test_interval_and_relative_error_on_the_stats():
    stats = TimingStats(clock="fake", samples=[float(x) for x in range(10, 0, -1)])
    assert (stats.ci_low, stats.ci_high) == (2.0, 9.0)
    assert stats.rse == pytest.approx((9 - 2) / (2 * 1.959964) / 5.5, rel=1e-4)
    assert TimingStats(clock="fake", samples=[1.0, 2.0]).rse is None  # too few to bound the median
    assert relative_standard_error(sorted([1.0] * 20)) == 0.0


def test_too_few_samples_have_no_interval_and_say_why():
    """88_MinGPTNewGelu on a CPU: one sample before the wall-time cap, once printed as a "95 %"
    interval [1.266, 1.266]. Below 6 samples no pair brackets the median with 95 % (the range of 5
    misses it 1 time in 16), so there is no interval, and a note says why."""
    assert MIN_INTERVAL_SAMPLES == 6 and 2 / 2**5 > 0.05 >= 2 / 2**6
    median, low, high = ratio_interval([1.266e-3], [1e-3])
    assert median == pytest.approx(1.266) and low is None and high is None
    assert ratio_interval([2.0] * 5, [1.0] * 5)[1:] == (None, None)
    assert ratio_interval([2.0] * 6, [1.0] * 6)[1:] == (2.0, 2.0)
    one = TimingStats(clock="fake", samples=[1e-3], stopped_by="max_wall_seconds")
    assert one.ci_low is None and one.ci_high is None and one.rse is None
    assert one.ci_note == "no 95 % interval: 1 sample, at least 6 needed (sampling stopped by max_wall_seconds)"
    stored = one.model_dump(mode="json")
    assert stored["ci_low"] is None and stored["ci_high"] is None and "max_wall_seconds" in stored["ci_note"]
    assert TimingStats(clock="fake", samples=[float(x) for x in range(6)]).ci_note is None


def test_a_wall_time_cap_after_one_sample_leaves_a_median_without_an_interval():
    wall = FakeWall()
    policy = TimingPolicy.for_device("cpu")
    sampler = Sampler(policy, wall)
    sampler.warmed()
    wall.now = policy.max_wall_seconds + 1  # one slow call took the whole budget
    sampler.add(3.0)
    stats = sampler.stats("fake")
    assert sampler.stopped_by == "max_wall_seconds" and stats.n == 1 and stats.median == 3.0
    assert stats.ci_low is None and "1 sample" in (stats.ci_note or "")


def test_precision_rule_stops_a_steady_kernel_early_and_lets_a_noisy_one_run_to_the_cap():
    policy = TimingPolicy(warmup_calls=0, warmup_seconds=0, min_samples=10, min_seconds=0.009, target_rse=0.005,
                          max_samples=400, max_seconds=100.0, max_wall_seconds=1e9)
    rng = random.Random(1)
    steady = Sampler(policy, FakeWall())
    while steady.stopped_by is None:
        steady.add(1e-3 * (1 + rng.gauss(0, 0.002)))
    assert steady.stopped_by == "precision" and steady.stats("fake").n == 10
    assert steady.stats("fake").rse <= 0.005

    noisy = Sampler(policy, FakeWall())
    while noisy.stopped_by is None:
        noisy.add(1e-3 * rng.uniform(1.0, 3.0))  # a median that does not settle within 0.5 % by 400
    assert noisy.stopped_by == "max_samples" and noisy.stats("fake").n == 400

    slow = Sampler(policy.model_copy(update={"max_seconds": 0.05}), FakeWall())
    while slow.stopped_by is None:
        slow.add(1e-2)  # steady, but the measured-time cap comes before min_samples
    assert slow.stopped_by == "max_seconds" and slow.stats("fake").n == 5

    # the minimum measured time holds the precision rule back
    held = Sampler(policy.model_copy(update={"min_seconds": 0.05}), FakeWall())
    while held.stopped_by is None:
        held.add(1e-3)
    assert held.stopped_by == "precision" and held.stats("fake").n == 50


def test_the_spin_before_a_timed_call_follows_the_hosts_time_to_queue_it():
    """A call whose launches took 320 us of host time is held 480 us next, so the events time its
    GPU work rather than its launcher; never less than 200 us, never more than 2 ms."""
    from rooftop.measure.timer import CudaEventClock, hold_seconds

    assert hold_seconds([]) == CudaEventClock.HOLD_SECONDS == 200e-6
    assert hold_seconds([20e-6, 50e-6]) == 200e-6  # a quick launcher keeps the least spin
    assert abs(hold_seconds([100e-6, 320e-6, 150e-6]) - 480e-6) < 1e-12  # the longest of the window
    assert hold_seconds([0.4]) == CudaEventClock.MAX_HOLD_SECONDS == 2e-3  # host-bound: timed as such
