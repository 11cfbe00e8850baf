"""The measurement rules that need no GPU: clocks, pools, paired ratios, the in-process loop and
the roofline floor."""

import statistics

import pytest
import torch

from rooftop.check.inputs import InputPool, pool_size
from rooftop.measure.loop import measure
from rooftop.measure.measurement import ratio_interval
from rooftop.measure.stopping import Sampler, TimingPolicy
from rooftop.score.hardware import lookup
from rooftop.score.roofline import implausible

MB = 1 << 20


class FakeWall:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FakeClock:
    """Returns scripted times and records which inputs each call saw."""

    name = "fake"

    def __init__(self, times):
        self.times, self.calls = list(times), 0

    def time(self, call, inputs=None):
        if inputs is not None:
            inputs()
        call()
        self.calls += 1
        return self.times[(self.calls - 1) % len(self.times)]


def test_low_clock_samples_are_dropped_and_taken_again_and_many_flag_it():
    policy = TimingPolicy(warmup_calls=0, warmup_seconds=0, min_samples=5, min_seconds=0, target_rse=None)
    sampler = Sampler(policy, FakeWall(), max_clock_mhz=2000.0)
    assert sampler.low_clock(1400.0) and not sampler.low_clock(1500.0) and not sampler.low_clock(None)
    kept = [sampler.add(1e-3, mhz) for mhz in (1980, 1000, 1990, 600, 1985, 1970, 1975)]
    assert kept == [True, False, True, False, True, True, True]
    stats = sampler.stats("fake")
    assert sampler.stopped_by == "min_samples" and stats.n == 5 and stats.low_clock_dropped == 2
    assert stats.clock_min_mhz == 1970 and stats.clock_median_mhz == 1980
    assert sampler.many_dropped  # 2 of 7 is over 10 %
    steady = Sampler(policy, FakeWall(), max_clock_mhz=2000.0)
    for _ in range(5):
        steady.add(1e-3, 1900.0)
    assert not steady.many_dropped and steady.stats("fake").low_clock_dropped == 0


def test_a_gpu_capped_for_good_is_measured_after_the_drop_limit():
    policy = TimingPolicy(warmup_calls=0, warmup_seconds=0, min_samples=3, min_seconds=0, target_rse=None,
                          max_dropped=4)
    sampler = Sampler(policy, FakeWall(), max_clock_mhz=2000.0)
    while sampler.stopped_by is None:
        sampler.add(1e-3, 900.0)  # always below 75 %
    assert sampler.dropped == 4 and len(sampler.samples) == 3 and sampler.many_dropped


def test_clocks_unknown_drop_nothing():
    sampler = Sampler(TimingPolicy(target_rse=None, min_samples=2, min_seconds=0, warmup_calls=0, warmup_seconds=0),
                      FakeWall(), max_clock_mhz=None)
    assert sampler.add(1e-3, 100.0) and not sampler.low_clock(1.0)


def test_paired_ratios_cancel_drift_that_a_ratio_of_medians_does_not_see_through():
    # the machine slows down by 2x halfway through; each pair shares the slowdown
    reference = [2e-3] * 10 + [4e-3] * 10
    candidate = [1e-3] * 10 + [2e-3] * 10
    median, lo, hi = ratio_interval(reference, candidate)
    assert median == lo == hi == 2.0
    noisy = ratio_interval([2.0 + 0.01 * i for i in range(50)], [1.0] * 50)
    assert noisy[1] < noisy[0] < noisy[2]
    assert noisy[0] == pytest.approx(statistics.median(2.0 + 0.01 * i for i in range(50)))
    assert ratio_interval([], []) is None and ratio_interval([1.0], [0.0]) is None


@pytest.mark.parametrize("set_bytes, expected", [(1024, 50), (16 * MB, 16), (32 * MB, 8), (1024 * MB, 8)])
def test_pool_holds_256_mb_or_8_sets_and_at_most_50(set_bytes, expected):
    assert pool_size(set_bytes) == expected


def test_pool_stays_within_a_quarter_of_device_memory_but_never_below_two():
    assert pool_size(1024 * MB, memory_bytes=16 * 1024 * MB) == 4
    assert pool_size(1024 * MB, memory_bytes=2 * 1024 * MB) == 2


def test_pool_cycles_and_no_call_sees_the_previous_calls_pointers_or_values():
    pool = InputPool()
    seen = []
    for seed in range(30):
        torch.manual_seed(seed)
        inputs = pool.admit([torch.randn(1000)])
        seen.append((inputs[0].data_ptr(), inputs[0].sum().item()))
        assert len(pool) == min(seed + 1, pool.size)
    assert pool.size == 50  # 4 kB sets: the 50-set cap
    for (ptr, total), (next_ptr, next_total) in zip(seen, seen[1:]):
        assert ptr != next_ptr and total != next_total
    small = InputPool()
    small.size = 3  # as if each set were large: the oldest retires first
    for i in range(5):
        small.admit([torch.full((4,), float(i))])
    assert [int(s[0][0]) for s in small._sets] == [2, 3, 4]
    small.admit([torch.zeros(4)], "other_shape")  # another shape's set starts the pool afresh
    assert len(small) == 1 and small.size == 50


def test_a_full_pool_makes_room_before_the_next_set_is_made():
    """Two sets of 6 GB each: the third must not be made while both are alive; the set just
    before the new one stays, so consecutive calls still get different addresses."""
    pool = InputPool()
    pool.make_room("s")  # nothing admitted yet: nothing to retire
    pointers = []
    for i in range(6):
        pool.make_room("s")
        assert len(pool) <= 1 or pool.size is None or len(pool) < pool.size
        x = torch.full((1 << 16,), float(i))
        pool.admit([x], "s", sets=2)
        pointers.append(x.data_ptr())
        assert len(pool) == min(i + 1, 2)
    assert all(a != b for a, b in zip(pointers, pointers[1:]))


def test_the_in_process_loop_warms_up_then_samples_fresh_inputs_each_call():
    made = []

    def fresh():
        made.append(torch.randn(8))
        return [made[-1]]

    got = []
    policy = TimingPolicy(warmup_calls=2, warmup_seconds=0, min_samples=4, min_seconds=0, target_rse=None)
    clock = FakeClock([1e-3, 2e-3])
    stats = measure(lambda x: got.append(x), fresh, policy, clock)
    assert stats.warmup_calls == 2 and stats.n == 4 and stats.stopped_by == "min_samples"
    assert clock.calls == len(made) == len(got) == 6 and all(a is b for a, b in zip(made, got))
    assert stats.wall_seconds is not None and stats.wall_seconds >= 0


def test_roofline_floor_rejects_below_0_9_of_the_compute_floor():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    flops = 2 * 8192**3
    floor = flops / h100.peak_flops("bfloat16")
    assert implausible(h100, "bfloat16", flops, None, floor * 0.95) is None  # 95 % of the floor: possible
    assert "compute floor" in implausible(h100, "bfloat16", flops, None, floor * 0.85)


def test_memory_floor_counts_only_bytes_beyond_the_l2():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    bw = h100.dram_bytes_per_s
    # 40 MB fits in the 50 MB L2: written bytes may sit there at the end event, no memory floor
    assert implausible(h100, "float32", None, 40e6, 1e-9) is None
    nbytes = 4e9
    floor = (nbytes - h100.l2_mb * MB) / bw
    assert implausible(h100, "float32", None, nbytes, floor * 0.95) is None
    assert "memory floor" in implausible(h100, "float32", None, nbytes, floor * 0.85)
    assert implausible(None, "float32", 1e15, 1e12, 1e-9) is None  # no datasheet: no judgement


def test_a_gpu_at_its_power_limit_idles_before_the_next_sample():
    policy = TimingPolicy(cool_below=0.9, cooldown=2.0, max_cooldown_seconds=0.05)
    sampler = Sampler(policy, FakeWall(), max_clock_mhz=2000.0)
    assert sampler.pause_after(0.01, 1980.0) == 0.0  # at full clock: no pause
    assert sampler.pause_after(0.01, 1700.0) == pytest.approx(0.02)  # 85 %: twice the call
    assert sampler.pause_after(1.0, 1700.0) == 0.05  # capped
    assert Sampler(policy, FakeWall()).pause_after(0.01, 100.0) == 0.0  # clocks unknown


def _sample_until_stopped(policy, seconds, wall_per_call, limit=5000):
    wall = FakeWall()
    sampler = Sampler(policy, wall)
    n = 0
    while sampler.stopped_by is None and n < limit:
        wall.now += wall_per_call
        sampler.add(seconds * (1 + 0.001 * (n % 3)))
        n += 1
    return sampler, wall.now


def test_a_short_kernel_stops_on_precision_after_the_wall_time_minimum():
    """25 us calls costing 1 ms of wall each: 0.5 s of measured time would take 20,000 calls, so
    the measured-time minimum alone ran into the sample cap; the wall-time minimum lets it stop."""
    policy = TimingPolicy(warmup_calls=0, warmup_seconds=0)
    sampler, wall = _sample_until_stopped(policy, 25e-6, 1e-3)
    assert sampler.stopped_by == "precision"
    assert 0.5 <= wall < 0.6 and len(sampler.samples) < policy.max_samples
    old = policy.model_copy(update={"min_wall_seconds": float("inf")})
    assert _sample_until_stopped(old, 25e-6, 1e-3)[0].stopped_by == "max_samples"


def test_a_long_kernel_stops_on_wall_time_too_and_on_measured_time_when_that_comes_first():
    """A 4 ms kernel whose calls cost 20 ms of wall stops at 0.5 s of wall time (25 samples, not
    the 125 that 0.5 s of measured time took); one whose calls cost no more than its own time
    reaches 0.5 s of measured time as soon."""
    policy = TimingPolicy(warmup_calls=0, warmup_seconds=0)
    sampler, wall = _sample_until_stopped(policy, 4e-3, 20e-3)
    assert sampler.stopped_by == "precision" and len(sampler.samples) == 26 and 0.5 <= wall < 0.55
    lean, wall = _sample_until_stopped(policy, 4e-3, 4e-3)
    assert lean.stopped_by == "precision" and sum(lean.samples) >= policy.min_seconds and len(lean.samples) <= 127
    held = _sample_until_stopped(policy.model_copy(update={"min_wall_seconds": float("inf")}), 4e-3, 20e-3)[0]
    assert len(held.samples) == 125  # measured time alone: the rule before


def test_precision_is_still_required_after_the_wall_time_minimum():
    policy = TimingPolicy(warmup_calls=0, warmup_seconds=0, max_samples=400)
    wall = FakeWall()
    sampler = Sampler(policy, wall)
    for i in range(400):  # noisy: alternating 20 and 40 us, the median never settles within 0.5 %
        wall.now += 2e-3
        sampler.add(20e-6 if i % 2 else 40e-6)
    assert sampler.stopped_by == "max_samples"


def test_a_checked_calls_cached_blocks_are_handed_back_only_for_a_large_shape(monkeypatch):
    """Emptying the allocator's cache after every checked call cost small shapes their allocations
    again on every next call; it is done only when the cache holds a large share of the device."""
    import torch

    from rooftop.check import inputs

    emptied = []
    monkeypatch.setattr(inputs, "device_memory", lambda device: 80 << 30)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    for reserved, expected in ((64 << 20, []), (20 << 30, [True])):
        emptied.clear()
        monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device, r=reserved: r)
        inputs.release_cached(torch.device("cuda"))
        assert emptied == expected, reserved
    monkeypatch.setattr(inputs, "device_memory", lambda device: None)  # the CPU: nothing to hand back
    inputs.release_cached(torch.device("cpu"))
    assert emptied == [True]


def test_a_shape_timed_right_after_the_solutions_last_call_skips_only_the_warm_up_seconds(monkeypatch):
    """A GPU that ran the solution a moment ago has its clocks up: the next shape keeps its warm-up
    calls (compiles, autotuning, first allocations) but not the 0.2 s minimum, a fifth of a small
    shape's timing; on the CPU, after an idle gap or before any call, the policy stays as it is."""
    import time
    from types import SimpleNamespace

    from rooftop.pipeline.trusted import timing

    policy = TimingPolicy()
    now = time.monotonic()
    warm = timing.warm_start(SimpleNamespace(device="cuda", calls=SimpleNamespace(last=now - 0.01)), policy)
    assert warm.warmup_seconds == 0.0 and warm.warmup_calls == policy.warmup_calls > 0
    assert policy.warmup_seconds > 0  # the gate's own policy is left alone
    for ev in (SimpleNamespace(device="cuda", calls=SimpleNamespace(last=now - 2 * timing.STILL_WARM - 1.0)),
               SimpleNamespace(device="cuda", calls=SimpleNamespace(last=None)),
               SimpleNamespace(device="cpu", calls=SimpleNamespace(last=now))):
        assert timing.warm_start(ev, policy) == policy
    sampler = Sampler(warm)
    assert sampler.warming
    for _ in range(policy.warmup_calls):
        sampler.warmed()
    assert not sampler.warming  # calls alone end it
