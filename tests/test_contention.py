"""The CPU-contention probe: thread settings, /proc readers on fixed contents, and the assessment."""

import dataclasses
import os
import subprocess
import sys
import time

import pytest

from rooftop.errors import UserError
from rooftop.measure import contention
from rooftop.measure.contention import (
    LoadSample,
    assess,
    busy_share,
    cpu_threads,
    pin_threads,
    ratio_spread,
    sample_load,
    steal_share,
    thread_env,
)

HZ = os.sysconf("SC_CLK_TCK")


def fake_proc(root, *, user, system, idle, steal=0, own=None, load="0.50 0.40 0.30 1/120 999"):
    """A /proc with two CPUs that split the given jiffies evenly, and a stat file for each process
    in `own` (pid -> jiffies, or (parent pid, jiffies, reaped children's jiffies))."""
    root.mkdir(exist_ok=True)
    (root / "loadavg").write_text(load + "\n")
    row = f"{user // 2} 0 {system // 2} {idle // 2} 0 0 0 {steal // 2} 0 0"
    (root / "stat").write_text(f"cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\n"
                               f"cpu0 {row}\ncpu1 {row}\nintr 1 2 3\nctxt 42\n")
    for pid, process in (own or {}).items():
        parent, jiffies, reaped = process if isinstance(process, tuple) else (1, process, 0)
        (root / str(pid)).mkdir(exist_ok=True)
        # a name with spaces and a parenthesis must not shift the fields
        (root / str(pid) / "stat").write_text(f"{pid} (py thon) x) S {parent} 1 1 0 -1 0 0 0 0 0 "
                                              f"{jiffies - 10} 10 {reaped - 1} 1 20 0 1 0 5 0 0\n")
    return root


def samples_around(tmp_path, first, second, pids=()):
    return (sample_load(pids, fake_proc(tmp_path / "a", **first)),
            sample_load(pids, fake_proc(tmp_path / "b", **second)))


def counters(**extra):
    """Counters at a start; the tests' second samples add 2 * HZ jiffies: one second on two CPUs."""
    return {"user": 0, "system": 0, "idle": 0, **extra}


# -- threads ------------------------------------------------------------------------------------
def test_one_thread_by_default_and_override(monkeypatch):
    monkeypatch.delenv(contention.THREADS_ENV, raising=False)
    assert cpu_threads() == 1
    monkeypatch.setenv(contention.THREADS_ENV, "3")
    assert cpu_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(contention.THREADS_ENV, bad)
        with pytest.raises(UserError, match=contention.THREADS_ENV):
            cpu_threads()


def test_thread_env_covers_the_pools():
    env = thread_env(2)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "2"
    assert env[contention.THREADS_ENV] == "2"


def test_pin_threads_twice_after_parallel_work():
    import torch

    before = torch.get_num_threads()
    try:
        torch.randn(256, 256) @ torch.randn(256, 256)  # parallel work has started: inter-op is fixed now
        pin_threads(1)
        pin_threads(1)  # the second inter-op call raises inside torch; it must not escape
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


# -- /proc readers --------------------------------------------------------------------------------
def test_sample_reads_load_cpus_and_own_pids(tmp_path):
    s = sample_load([7, 8], fake_proc(tmp_path, user=100, system=50, idle=400, steal=20, own={7: 30}))
    assert s == LoadSample(load1=0.5, running=1, cpus=2, total=570, busy=150, steal=20, own={7: 30})


def test_own_processes_include_descendants(tmp_path):
    # 5 is the evaluator, 6 the sandbox launcher it started, 7 the child under it; 9 is a stranger
    root = fake_proc(tmp_path, user=0, system=0, idle=0, own={5: 10, 6: (5, 20, 0), 7: (6, 30, 0), 9: 40})
    assert sample_load([5], root).own == {5: 10, 6: 20, 7: 30}
    assert sample_load([], root).own == {}


def test_a_child_reaped_between_samples_still_counts_as_own(tmp_path):
    # the child used 30 jiffies before the first sample and 20 more; its parent reaped it
    first = counters(own={5: 10, 6: (5, 30, 0)})
    second = {"user": HZ, "system": 0, "idle": HZ, "own": {5: (1, 10, 50)}}
    before, after = samples_around(tmp_path, first, second, pids=[5])
    assert busy_share(before, after) == pytest.approx((HZ - 20) / HZ)


def test_missing_proc_gives_no_sample_and_no_flag(tmp_path):
    assert sample_load([], tmp_path / "absent") is None
    found = assess(None, None, [1e-4] * 20, [5e-5] * 20, threads=1)
    assert not found.contended and found.reasons == [] and found.other_cores is None


def test_busy_share_excludes_own_processes(tmp_path):
    idle_second = counters(idle=2 * HZ)
    before, after = samples_around(tmp_path, counters(own={5: 10}),
                                   {"user": HZ, "system": 0, "idle": HZ, "own": {5: 10 + HZ}}, pids=[5])
    assert busy_share(before, after) == pytest.approx(0.0)  # all the work was ours
    before, after = samples_around(tmp_path, counters(own={5: 10}),
                                   {"user": 3 * HZ // 2, "system": HZ // 2, "idle": 0, "own": {5: 10 + HZ // 2}},
                                   pids=[5])
    assert busy_share(before, after) == pytest.approx(1.5)
    before, after = samples_around(tmp_path, counters(), idle_second)
    assert busy_share(before, after) == pytest.approx(0.0)


def test_short_interval_is_not_judged(tmp_path):
    before, after = samples_around(tmp_path, counters(), counters(user=2))  # 10 ms of ticks
    assert busy_share(before, after) is None and steal_share(before, after) is None


# -- the assessment ---------------------------------------------------------------------------------
QUIET_CANDIDATE = [100e-6 * (1 + 0.02 * (i % 5)) for i in range(20)]
QUIET_REFERENCE = [50e-6 * (1 + 0.03 * (i % 3)) for i in range(20)]


def test_quiet_timing_is_not_flagged(tmp_path):
    before, after = samples_around(tmp_path, counters(own={5: 0}),
                                   {"user": HZ // 20, "system": HZ, "idle": HZ, "own": {5: HZ}}, pids=[5])
    found = assess(before, after, QUIET_CANDIDATE, QUIET_REFERENCE, threads=1)
    assert not found.contended, found.reasons
    assert found.ratio_spread is not None and found.ratio_spread < 1.2


def test_spread_of_paired_ratios_is_flagged():
    reference = list(QUIET_REFERENCE)
    for i in (2, 7, 11, 16):  # a neighbour held the core through a few reference calls
        reference[i] *= 100
    found = assess(None, None, QUIET_CANDIDATE, reference, threads=1)
    assert found.contended and found.ratio_spread > contention.MAX_RATIO_SPREAD
    assert "spread" in found.reasons[0]


def test_two_slow_calls_in_twenty_are_not_contention():
    reference = list(QUIET_REFERENCE)
    reference[3] *= 100  # a timer interrupt or a page fault now and then is no neighbour
    reference[12] *= 100
    found = assess(None, None, QUIET_CANDIDATE, reference, threads=1)
    assert not found.contended and found.ratio_spread < 1.5


def test_too_few_pairs_give_no_spread():
    assert ratio_spread([1e-4] * 9, [1e-4, 1e-2] * 4 + [1e-2]) is None
    assert ratio_spread([1e-4, 0.0] * 9, [1e-4] * 18) is None  # zeros are not pairs
    assert ratio_spread([1e-4] * 10, [1e-4, 1e-2] * 5) == pytest.approx(100)


def test_steal_is_flagged(tmp_path):
    before, after = samples_around(tmp_path, counters(), counters(idle=2 * HZ * 8 // 10, steal=2 * HZ // 5))
    found = assess(before, after, QUIET_CANDIDATE, QUIET_REFERENCE, threads=1)
    assert found.steal_share == pytest.approx(0.2, rel=0.02)
    assert found.contended and "stole 20 %" in found.reasons[0]


def test_busy_neighbour_is_flagged_by_headroom(tmp_path):
    # one other process spinning on a machine of two cores leaves less than a core and a half spare
    before, after = samples_around(tmp_path, counters(), {"user": HZ, "system": 0, "idle": HZ})
    assert busy_share(before, after) == pytest.approx(1.0)
    for threads in (1, 2):
        found = assess(before, after, QUIET_CANDIDATE, QUIET_REFERENCE, threads=threads)
        assert found.contended and found.other_cores == pytest.approx(1.0)
        assert f"other processes used 1.00 of 2 cores while timing with {threads} thread(s)" in found.reasons[0]
    # on sixteen cores the same neighbour leaves plenty; fifteen cores of other work do not
    start = LoadSample(load1=1.0, running=2, cpus=16, total=0, busy=0, steal=0)
    one_core = LoadSample(load1=1.0, running=2, cpus=16, total=16 * HZ, busy=HZ, steal=0)
    assert not assess(start, one_core, QUIET_CANDIDATE, QUIET_REFERENCE, threads=1).contended
    crowded = dataclasses.replace(one_core, busy=15 * HZ)
    assert assess(start, crowded, QUIET_CANDIDATE, QUIET_REFERENCE, threads=1).contended


def test_background_noise_under_the_floor_is_not_flagged(tmp_path):
    before, after = samples_around(tmp_path, counters(), {"user": HZ // 10, "system": 0, "idle": 2 * HZ})
    assert not assess(before, after, QUIET_CANDIDATE, QUIET_REFERENCE, threads=2).contended


# -- on this machine ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_real_busy_process_shows_in_busy_share():
    if sample_load() is None:
        pytest.skip("no /proc on this system")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        before, before_own = sample_load(), sample_load([os.getpid()])
        time.sleep(2.0)
        after, after_own = sample_load(), sample_load([os.getpid()])
    finally:
        spinner.kill()
        spinner.wait()
    others, without_ours = busy_share(before, after), busy_share(before_own, after_own)
    # the spinner alone is worth most of a core (less only if the machine is crowded); as a
    # descendant of this process it is not other work once this pid is named as ours
    assert others is not None and others > 0.5
    assert without_ours is not None and others - without_ours > 0.5
