from rooftop.measure.measurement import TimingStats
from rooftop.measure.timer import TimingPolicy, measure


class FakeClock:
    """Each call 'takes' the next duration from a list: stopping rules become deterministic."""

    name = "fake"

    def __init__(self, durations):
        self.durations = list(durations)
        self.calls = 0

    def time(self, call):
        call()
        self.calls += 1
        return self.durations[(self.calls - 1) % len(self.durations)]


def test_statistics_from_raw_samples():
    stats = TimingStats(clock="fake", samples=[1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats.n == 5 and stats.median == 3.0 and stats.min == 1.0 and stats.max == 100.0
    assert stats.iqr == 2.0  # robust to the outlier
    assert TimingStats.model_validate_json(stats.model_dump_json()).median == 3.0


def test_stops_at_target_time_after_min_samples():
    ran = []
    policy = TimingPolicy(warmup_calls=2, warmup_seconds=0, min_samples=5, max_samples=100, target_seconds=1.0)
    stats = measure([lambda: ran.append(0), lambda: ran.append(1)], FakeClock([0.3]), policy)
    assert stats.n == 5 and stats.stopped_by == "target_seconds"  # 4 x 0.3 < 1.0 but min_samples rules
    assert stats.warmup_calls == 2 and ran.count(0) + ran.count(1) == 7
    stats = measure([lambda: None], FakeClock([0.001]), policy)
    assert stats.n == 100 and stats.stopped_by == "max_samples"


def test_calls_cycle_over_the_input_pool():
    seen = []
    policy = TimingPolicy(warmup_calls=0, warmup_seconds=0, min_samples=6, max_samples=6, target_seconds=0)
    measure([lambda i=i: seen.append(i) for i in range(3)], FakeClock([1e-3]), policy)
    assert seen == [0, 1, 2, 0, 1, 2]
