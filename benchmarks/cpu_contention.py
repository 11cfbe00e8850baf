"""Paired CPU timings on a quiet machine and beside a busy neighbour, with and without fixed threads.

It reproduces rooftop's CPU timing loop in miniature: a parent process times a reference
(`F.layer_norm`) and then asks a child process to time a plain-torch candidate computing the same,
call by call (A B A B ...); the child runs with OMP_WAIT_POLICY=PASSIVE as the evaluator's does.
Four cases: quiet or busy (one more process beside it: a torch matmul loop with default threads,
or a spinning Python loop), and default torch threads or `pin_threads(cpu_threads())` on both
sides. Each case runs in a fresh process, so the thread pools start untouched, and takes at least
--pairs pairs and one second (so /proc/stat's ticks can tell the machine's load). It prints the
medians and means, the paired speedup, what `contention.assess` concludes over the whole run, and
the ratio spread over windows of --window pairs (a CPU timing keeps at most 20 samples): the
largest and the share above `MAX_RATIO_SPREAD`, which was chosen from these windows.

    python benchmarks/cpu_contention.py [--pairs 2000] [--shape 128x512] [--neighbour torch|spin]
                                        [--cases quiet/pinned,busy/default] [--json out.json]

On a 2-core VM (128x512 float32; µs; "others": cores of other work; "win flag": share of
20-pair windows over the spread limit):

    neighbour  machine threads      ref us    mean cand us    mean speedup  spread  win max win flag others
    torch      quiet   default (2)    15.6    16.5   103.2   104.9    0.15    1.25      1.3       0%   0.03
    torch      quiet   pinned (1)     19.0    19.3    44.2    44.9    0.43    1.06      1.3       0%   0.00
    torch      busy    default (2)  6418.8  4097.8   119.8   185.9   33.52  467.39    743.8      54%   1.00
    torch      busy    pinned (1)     20.2    20.4    46.4    47.3    0.43    1.10      2.7       0%   1.42
    spin       busy    default (2)    13.2   101.3   103.4   238.0    0.13    2.03     12.2      11%   0.62
    spin       busy    pinned (1)     20.1    20.5    43.9    44.5    0.46    1.06      3.5       0%   1.00

Pinned, the busy runs time as the quiet ones do. Unpinned, a busy neighbour slows many of the
reference's calls by 100x and more (here its median: a speedup of 34x; in other runs half the
calls, which left the median alone but not the mean), and even on a quiet machine the two pools
differ: the reference's spinning workers gain from two threads, the candidate's sleeping ones
(OMP_WAIT_POLICY=PASSIVE) lose 2.3x, so the speedup moves 3x. Every busy run is flagged by the
other work's share, the unpinned run beside torch also by the spread; no quiet run is. In a run
where every reference call was slow alike, only 10 % of windows spread: the other work's share is
the rule that catches it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = str(Path(__file__).resolve())
MIN_SECONDS = 1.0
SRC = str(Path(__file__).resolve().parents[1] / "src")
# busy loops that end once their parent is gone, so an interrupted run leaves nothing spinning
NEIGHBOURS = {
    "spin": "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass",
    "torch": "import os, torch\nparent, a = os.getppid(), torch.randn(512, 512)\nwhile os.getppid() == parent: a @ a",
}


def _inputs(rows: int, cols: int):
    import torch

    g = torch.Generator().manual_seed(0)
    return (torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g), torch.randn(cols, generator=g))


def _reference(x, w, b):
    import torch.nn.functional as F

    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def _candidate(x, w, b):
    import torch

    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdim=True)
    return centred * torch.rsqrt(var + 1e-5) * w + b


def _timed(fn, args) -> float:
    import torch

    with torch.no_grad():
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start


def candidate_worker(pinned: bool, rows: int, cols: int) -> None:
    """The child: one timed candidate call per line read."""
    from rooftop.measure.contention import cpu_threads, pin_threads

    if pinned:
        pin_threads(cpu_threads())
    args = _inputs(rows, cols)
    for line in sys.stdin:
        if line.strip() != "go":
            break
        print(repr(_timed(_candidate, args)), flush=True)


def case_worker(pinned: bool, pairs: int, window: int, rows: int, cols: int) -> None:
    """The parent of one case: paired calls, load samples around them, the assessment as JSON."""
    import torch

    from rooftop.measure import contention

    threads = contention.cpu_threads() if pinned else torch.get_num_threads()
    if pinned:
        contention.pin_threads(threads)
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **(contention.thread_env(threads) if pinned else {})}
    child = subprocess.Popen([sys.executable, SCRIPT, "--candidate", *(["--pinned"] if pinned else []),
                              "--shape", f"{rows}x{cols}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    assert child.stdin is not None and child.stdout is not None
    args = _inputs(rows, cols)

    def pair() -> tuple[float, float]:
        reference = _timed(_reference, args)
        child.stdin.write("go\n")
        child.stdin.flush()
        return float(child.stdout.readline()), reference

    for _ in range(20):
        pair()
    pids = [os.getpid(), child.pid]
    before = contention.sample_load(pids)
    taken, started = [], time.monotonic()
    while len(taken) < pairs or time.monotonic() - started < MIN_SECONDS:  # long enough for /proc/stat's ticks
        taken.append(pair())
    after = contention.sample_load(pids)
    child.stdin.close()
    child.wait()
    candidate, reference = [c for c, _ in taken], [r for _, r in taken]
    found = contention.assess(before, after, candidate, reference, threads=threads)
    spreads = [contention.ratio_spread(candidate[i:i + window], reference[i:i + window])
               for i in range(0, len(taken) - window + 1, window)]
    spreads = [s for s in spreads if s is not None]
    flagged = sum(s > contention.MAX_RATIO_SPREAD for s in spreads) / len(spreads)
    print(json.dumps({"threads": threads, "candidate_us": 1e6 * statistics.median(candidate),
                      "reference_us": 1e6 * statistics.median(reference),
                      "candidate_mean_us": 1e6 * statistics.fmean(candidate),
                      "reference_mean_us": 1e6 * statistics.fmean(reference),
                      "speedup": statistics.median(r / c for c, r in taken),
                      "pairs": len(taken), "window_spread_max": max(spreads), "windows_flagged": flagged,
                      "assessment": found.model_dump(), "candidate": candidate, "reference": reference}))


def run_case(busy: bool, pinned: bool, args: argparse.Namespace) -> dict:
    neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOURS[args.neighbour]]) if busy else None
    try:
        if neighbour is not None:
            time.sleep(1.0)  # let it reach full speed
        out = subprocess.run([sys.executable, SCRIPT, "--case", *(["--pinned"] if pinned else []),
                              "--pairs", str(args.pairs), "--window", str(args.window), "--shape", args.shape],
                             check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC})
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    return {"machine": "busy" if busy else "quiet", "mode": "pinned" if pinned else "default",
            **json.loads(out.stdout)}


def print_table(results: list[dict]) -> None:
    print(f"{'machine':7} {'threads':11} {'ref us':>7} {'mean':>7} {'cand us':>7} {'mean':>7} {'speedup':>7} "
          f"{'spread':>7} {'win max':>8} {'win flag':>8} {'others':>6} {'steal':>6}  contended")
    for r in results:
        a = r["assessment"]
        others = "-" if a["other_cores"] is None else f"{a['other_cores']:.2f}"
        steal = "-" if a["steal_share"] is None else f"{a['steal_share']:.3f}"
        threads = f"{r['mode']} ({r['threads']})"
        print(f"{r['machine']:7} {threads:11} {r['reference_us']:7.1f} {r['reference_mean_us']:7.1f} "
              f"{r['candidate_us']:7.1f} {r['candidate_mean_us']:7.1f} {r['speedup']:7.2f} "
              f"{a['ratio_spread']:7.2f} {r['window_spread_max']:8.1f} {r['windows_flagged']:8.0%} {others:>6} "
              f"{steal:>6}  {a['contended']}")
    for r in results:
        for reason in r["assessment"]["reasons"]:
            print(f"  {r['machine']}/{r['mode']}: {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--shape", default="128x512", help="rows x cols of the layer-norm input")
    parser.add_argument("--neighbour", choices=sorted(NEIGHBOURS), default="torch")
    parser.add_argument("--cases", default="quiet/default,quiet/pinned,busy/default,busy/pinned")
    parser.add_argument("--json", type=Path, help="also write every case, raw samples included")
    parser.add_argument("--case", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--candidate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pinned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    if args.candidate:
        return candidate_worker(args.pinned, rows, cols)
    if args.case:
        return case_worker(args.pinned, args.pairs, args.window, rows, cols)
    cases = [case.split("/") for case in args.cases.split(",")]
    results = [run_case(machine == "busy", mode == "pinned", args) for machine, mode in cases]
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
