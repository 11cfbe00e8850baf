"""CPU timings that a busy neighbour cannot silently inflate.

Two processes take turns on the CPU: the trusted side times the reference, the child times the
candidate. With torch's default thread pool, a call splits over every core and then waits at a
barrier for the slowest worker; when another process holds one of those cores, the call waits a
scheduler time slice (milliseconds) for a 50 µs op. So both sides run with one fixed thread count,
and `assess` says when the machine was shared anyway: other processes' CPU time, hypervisor steal,
and a wide spread of the call-by-call ratios.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from rooftop.errors import UserError

THREADS_ENV = "ROOFTOP_CPU_THREADS"
POOL_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                  "VECLIB_MAXIMUM_THREADS")
# Thresholds, measured with benchmarks/cpu_contention.py on a 2-core VM (see its docstring):
# quiet runs spread their paired ratios by at most ~1.6x (P90/P10 over 20 pairs); one busy
# neighbour beside unpinned threads spread them by 20x and more
MAX_RATIO_SPREAD = 3.0
# cores' worth of other work: below this it is daemons and tick noise (a quiet VM shows <= 0.05)
BUSY_FLOOR_CORES = 0.25
# flag when other work left fewer than the timing's threads plus this many cores spare
HEADROOM_CORES = 0.5
MAX_STEAL_SHARE = 0.05  # hypervisor steal: 5 % of the CPUs' time is a time slice in every ~20 ms
MIN_INTERVAL_SECONDS = 0.2  # /proc/stat counts 10 ms ticks: shorter intervals read as noise
MIN_PAIRS = 5  # below this, a percentile spread is just the extremes


def cpu_threads() -> int:
    """Intra-op threads for both sides of a CPU timing: 1 unless ROOFTOP_CPU_THREADS says more.

    The two processes take turns, so one thread each keeps a core free for the other side and a
    neighbour; a single-threaded call never waits at a barrier for a worker the OS gave away; and
    CPU timings are smoke runs on small shapes, where parallel regions cost about what they save.
    Both sides must use the same count, or the speedup compares thread pools, not code."""
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"{THREADS_ENV}={text!r}: expected a positive whole number of threads")
    return int(text)


def pin_threads(n: int) -> None:
    """Use `n` intra-op (and, while still settable, inter-op) threads in this process."""
    import torch

    torch.set_num_threads(n)
    try:  # torch refuses once inter-op work has started; intra-op threads are what timing needs
        torch.set_num_interop_threads(n)
    except RuntimeError:
        pass


def thread_env(n: int) -> dict[str, str]:
    """Environment that gives a child process `n` threads in every pool before torch loads (and
    the same `cpu_threads()`); idle OpenMP workers sleep rather than spin through the other side's
    turn."""
    env = {name: str(n) for name in (THREADS_ENV, *POOL_VARIABLES)}
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


@dataclass(frozen=True)
class LoadSample:
    """The machine's CPU counters at one moment, summed over the CPUs this process may use."""

    load1: float  # 1-minute load average
    running: int  # runnable tasks now, the reader included
    cpus: int  # CPUs summed in the jiffies below
    total: int  # jiffies, all states
    busy: int  # jiffies not idle, not waiting for I/O, not stolen
    steal: int  # jiffies the hypervisor gave to other machines
    own: dict[int, int] = field(default_factory=dict)  # pid -> its user+system jiffies


def sample_load(own_pids: Iterable[int] = (), root: Path = Path("/proc")) -> LoadSample | None:
    """Read the counters, with the CPU time of `own_pids` (the timing's own processes, excluded
    from other work); None where /proc cannot be read."""
    try:
        load = (root / "loadavg").read_text().split()
        stat = (root / "stat").read_text().splitlines()
    except OSError:
        return None
    allowed = {f"cpu{i}" for i in os.sched_getaffinity(0)} if hasattr(os, "sched_getaffinity") else set()
    rows = [line.split() for line in stat if line.startswith("cpu")]
    chosen = [r for r in rows if r[0] in allowed] or [r for r in rows if r[0] == "cpu"]
    if not chosen or len(load) < 4:
        return None
    sums = [sum(int(r[i]) if i < len(r) else 0 for r in chosen) for i in range(1, 9)]
    user, nice, system, idle, iowait, irq, softirq, steal = sums
    cpus = len(chosen) if chosen[0][0] != "cpu" else max(1, len(rows) - 1)
    own = {pid: t for pid in own_pids if (t := _process_jiffies(root / str(pid) / "stat")) is not None}
    return LoadSample(load1=float(load[0]), running=int(load[3].split("/")[0]), cpus=cpus, total=sum(sums),
                      busy=user + nice + system + irq + softirq, steal=steal, own=own)


def _process_jiffies(path: Path) -> int | None:
    try:
        fields = path.read_text().rsplit(")", 1)[1].split()  # the name may hold spaces and ')'
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the line)
    except (OSError, IndexError, ValueError):
        return None


def _interval_ok(before: LoadSample, after: LoadSample) -> bool:
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return before.cpus == after.cpus and (after.total - before.total) / after.cpus >= MIN_INTERVAL_SECONDS * hz


def busy_share(before: LoadSample, after: LoadSample) -> float | None:
    """Cores' worth of CPU time that work other than the sampled pids used between the samples."""
    if not _interval_ok(before, after):
        return None
    own = sum(after.own[p] - before.own[p] for p in before.own.keys() & after.own.keys())
    per_cpu = (after.total - before.total) / after.cpus
    return max(0.0, after.busy - before.busy - own) / per_cpu


def steal_share(before: LoadSample, after: LoadSample) -> float | None:
    """Share of the CPUs' time the hypervisor gave elsewhere between the samples."""
    if not _interval_ok(before, after):
        return None
    return (after.steal - before.steal) / (after.total - before.total)


def ratio_spread(candidate: Sequence[float], reference: Sequence[float]) -> float | None:
    """P90 / P10 of the paired ratios reference_i / candidate_i: tight on a quiet machine, wide
    when some calls of one side lost a time slice to a neighbour."""
    ratios = [r / c for c, r in zip(candidate, reference) if c > 0 and r > 0]
    if len(ratios) < MIN_PAIRS:
        return None
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    return deciles[-1] / deciles[0]


class Contention(BaseModel):
    """Whether a CPU timing shared its machine, and why it is thought to have."""

    contended: bool = False
    reasons: list[str] = []
    other_cores: float | None = None
    steal_share: float | None = None
    ratio_spread: float | None = None


def assess(before: LoadSample | None, after: LoadSample | None, candidate_samples: Sequence[float],
           reference_samples: Sequence[float], threads: int | None = None) -> Contention:
    """Judge a paired CPU timing from load samples taken just before and after it (with the
    timing's own pids) and its samples; `threads` is the count each side ran with."""
    threads = cpu_threads() if threads is None else threads
    found = Contention(ratio_spread=ratio_spread(candidate_samples, reference_samples))
    if before is not None and after is not None:
        found.other_cores, found.steal_share = busy_share(before, after), steal_share(before, after)
    reasons = found.reasons
    others = found.other_cores
    if others is not None and others >= BUSY_FLOOR_CORES and after is not None \
            and after.cpus - others < threads + HEADROOM_CORES:
        reasons.append(f"other processes used {others:.2f} of {after.cpus} cores while timing with "
                       f"{threads} thread(s) a side (load average {after.load1:.2f}, {after.running} tasks runnable)")
    if found.steal_share is not None and found.steal_share > MAX_STEAL_SHARE:
        reasons.append(f"the hypervisor stole {100 * found.steal_share:.0f} % of the CPU time while timing")
    spread = found.ratio_spread
    if spread is not None and spread > MAX_RATIO_SPREAD:
        reasons.append(f"the paired ratios reference/candidate spread over {spread:.1f}x from the 10th to the "
                       f"90th percentile (a quiet machine stays under {MAX_RATIO_SPREAD:g}x)")
    found.contended = bool(reasons)
    return found
