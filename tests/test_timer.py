from rooftop.measure.measurement import TimingStats
from rooftop.measure.timer import Sampler, TimingPolicy


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


def test_stops_at_target_time_after_min_samples():
    policy = TimingPolicy(warmup_calls=2, warmup_seconds=0, min_samples=5, max_samples=100, target_seconds=1.0)
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
    assert stats.n == 5 and stats.stopped_by == "target_seconds" and stats.warmup_calls == 2
    fast = Sampler(policy, FakeWall())
    while fast.stopped_by is None:
        fast.warmed() if fast.warming else fast.add(0.001)
    assert fast.stats("fake").n == 100 and fast.stopped_by == "max_samples"


def test_warmup_lasts_its_seconds_and_the_wall_limit_stops_sampling():
    wall = FakeWall()
    policy = TimingPolicy(warmup_calls=1, warmup_seconds=0.5, min_samples=3, max_samples=1000,
                          target_seconds=100.0, max_wall_seconds=10.0)
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
