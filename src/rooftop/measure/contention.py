"""CPU timings that a busy neighbour cannot silently inflate.

Two processes take turns on the CPU: the trusted side times the reference, the child times the
candidate. With torch's default thread pools a call splits over every core and waits at a barrier
for its slowest worker: when another process holds one of those cores, a 20 µs call waits out a
scheduler time slice (milliseconds), and even on a quiet machine the two sides' pools (one
spinning, one sleeping) differ enough to move the speedup 3x. So both sides run with one fixed
thread count, and `assess` says when the machine was shared anyway: other processes' CPU time,
hypervisor steal, and a wide spread of the call-by-call ratios."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from rooftop import config
from rooftop.errors import UserError

THREADS_ENV = config.CPU_THREADS
POOL_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Thresholds, from benchmarks/cpu_contention.py on a 2-core VM, with P90/P10 of the paired ratios
# over windows of 20 pairs (a CPU timing keeps at most 20): pinned, quiet or beside a busy process
# (6322 windows), none passed 5.1x; unpinned beside a busy torch process 53-59 % of windows went
# over 10x, beside a spinning one 0-24 % over 6x, within 3 points of the share over 3x
MAX_RATIO_SPREAD = 6.0
# cores' worth of other work: below this it is daemons and tick noise (quiet runs read <= 0.03)
BUSY_FLOOR_CORES = 0.25
# flag when other work left fewer cores than the timing's threads plus this many: one busy process
# beside a 2-core timing reads 0.9-1.3 cores and is flagged at any thread count
HEADROOM_CORES = 0.5
MAX_STEAL_SHARE = 0.05  # a lost 10 ms tick every 200 ms of CPU time; this VM showed at most 0.1 %
# 10 ms ticks: over 5-15 ms of paired calls a quiet VM read up to 2 cores of other work, over 50 ms 0.4
MIN_INTERVAL_SECONDS = 0.1
MIN_PAIRS = 10  # below this, the nearest-rank P90 is the largest ratio


def cpu_threads() -> int:
    """Intra-op threads for both sides of a CPU timing: 1 unless ROOFTOP_CPU_THREADS says more.

    The two processes take turns, so one thread each leaves a core to a neighbour; a one-thread
    call never waits at a barrier for a worker the OS gave away; and with no workers, OpenMP's
    wait policy stops mattering: with two threads, workers that sleep between calls (as a child
    with OMP_WAIT_POLICY=PASSIVE has) made 128x512 layer norms 5-9x slower than spinning ones, and
    spinning ones take the core from the other side's turn. CPU timings are smoke runs on small
    shapes, where parallel regions save little. Both sides must use the same count."""
    text = (config.read(THREADS_ENV) or "").strip()
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
    """Environment that gives a child process `n` threads in every pool before torch loads, and
    the same `cpu_threads()`."""
    return {name: str(n) for name in (THREADS_ENV, *POOL_VARIABLES)}


@dataclass(frozen=True)
class LoadSample:
    """The machine's CPU counters at one moment, summed over the CPUs this process may use."""

    load1: float  # 1-minute load average
    running: int  # runnable tasks now, the reader included
    cpus: int  # CPUs summed in the jiffies below
    total: int  # jiffies, all states
    busy: int  # jiffies not idle, not waiting for I/O, not stolen
    steal: int  # jiffies the hypervisor gave to other machines
    # the timing's own processes and their descendants: pid -> jiffies they and their reaped
    # children used (a child that exits between samples moves into its parent's count)
    own: dict[int, int] = field(default_factory=dict)
    at: float = field(default=0.0, compare=False)  # time.monotonic() when read


def sample_load(own_pids: Iterable[int] = (), root: Path = Path("/proc")) -> LoadSample | None:
    """Read the counters, with the CPU time of `own_pids` and all their descendants: the timing's
    own processes (the evaluator and the child, whatever sandbox launcher stands between them),
    which are not other work. Anything else these processes started counts as theirs too.
    None where /proc cannot be read."""
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
    own = _own_tree(root, set(own_pids)) if own_pids else {}
    return LoadSample(load1=float(load[0]), running=int(load[3].split("/")[0]), cpus=cpus, total=sum(sums),
                      busy=user + nice + system + irq + softirq, steal=steal, own=own, at=time.monotonic())


def _own_tree(root: Path, pids: set[int]) -> dict[int, int]:
    table: dict[int, tuple[int, int]] = {}  # pid -> (parent, jiffies)
    for entry in root.iterdir():
        try:  # the name in parentheses may hold spaces and ')'
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split() if entry.name.isdigit() else []
            # ppid, then utime, stime, cutime, cstime (fields 4 and 14-17 of the line)
            table[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
        except (OSError, IndexError, ValueError):
            continue
    tree, grown = pids & table.keys(), True
    while grown:
        more = {pid for pid, (parent, _) in table.items() if parent in tree} - tree
        tree, grown = tree | more, bool(more)
    return {pid: table[pid][1] for pid in tree}


def _interval_ok(before: LoadSample, after: LoadSample) -> bool:
    ticks = (after.total - before.total) / after.cpus
    return before.cpus == after.cpus and ticks > 0 and ticks >= MIN_INTERVAL_SECONDS * os.sysconf("SC_CLK_TCK")


def busy_share(before: LoadSample, after: LoadSample) -> float | None:
    """Cores' worth of CPU time that work other than the sampled pids used between the samples."""
    if not _interval_ok(before, after):
        return None
    own = sum(after.own.values()) - sum(before.own.values())
    per_cpu = (after.total - before.total) / after.cpus
    return max(0.0, after.busy - before.busy - own) / per_cpu


def steal_share(before: LoadSample, after: LoadSample) -> float | None:
    """Share of the CPUs' time the hypervisor gave elsewhere between the samples."""
    if not _interval_ok(before, after):
        return None
    return (after.steal - before.steal) / (after.total - before.total)


def ratio_spread(candidate: Sequence[float], reference: Sequence[float]) -> float | None:
    """P90 / P10 of the paired ratios reference_i / candidate_i: tight on a quiet machine, wide
    when some calls of one side lost a time slice to a neighbour. Nearest ranks, not interpolated:
    of 20 pairs the two most extreme each side are left out, so a stray interrupt cannot flag."""
    ratios = sorted(r / c for c, r in zip(candidate, reference) if c > 0 and r > 0)
    rank = math.ceil(0.9 * len(ratios)) - 1
    return ratios[rank] / ratios[len(ratios) - 1 - rank] if len(ratios) >= MIN_PAIRS else None


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
    timing's own pids) and its samples; `threads` is the count each side ran with. Samples less
    than MIN_INTERVAL_SECONDS apart leave the machine's share unjudged: take `before` earlier."""
    threads = cpu_threads() if threads is None else threads
    found = Contention(ratio_spread=ratio_spread(candidate_samples, reference_samples))
    if before is not None and after is not None:
        found.other_cores, found.steal_share = busy_share(before, after), steal_share(before, after)
    reasons, others = found.reasons, found.other_cores
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
