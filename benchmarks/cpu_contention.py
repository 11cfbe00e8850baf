"""Paired CPU timings on a quiet machine and beside a busy neighbour, with and without fixed threads.

It reproduces rooftop's CPU timing loop in miniature: a parent process times a reference
(`F.layer_norm`) and then asks a child process to time a plain-torch candidate computing the same,
call by call (A B A B ...); the child runs with OMP_WAIT_POLICY=PASSIVE as the evaluator's does.
Four cases: quiet or busy (one more process spinning beside it), and default torch threads or
`pin_threads(cpu_threads())` on both sides. Each case runs in a fresh process, so the thread pools
start untouched. It prints the medians, the paired speedup and what `contention.assess` concludes,
plus the ratio spread over windows of --window pairs (the CPU policy keeps at most 20 samples),
from which `MAX_RATIO_SPREAD` was chosen.

    python benchmarks/cpu_contention.py [--pairs 400] [--neighbour spin|torch] [--json out.json]
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
SRC = str(Path(__file__).resolve().parents[1] / "src")
NEIGHBOURS = {
    "spin": "while True: pass",
    "torch": "import torch\na = torch.randn(512, 512)\nwhile True: a @ a",
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

    from rooftop.measure.contention import assess, cpu_threads, pin_threads, ratio_spread, sample_load, thread_env

    threads = cpu_threads() if pinned else torch.get_num_threads()
    if pinned:
        pin_threads(threads)
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **(thread_env(threads) if pinned else {})}
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
    before = sample_load(pids)
    taken = [pair() for _ in range(pairs)]
    after = sample_load(pids)
    child.stdin.close()
    child.wait()
    candidate, reference = [c for c, _ in taken], [r for _, r in taken]
    found = assess(before, after, candidate, reference, threads=threads)
    spreads = [ratio_spread(candidate[i:i + window], reference[i:i + window])
               for i in range(0, pairs - window + 1, window)]
    spreads = [s for s in spreads if s is not None]
    print(json.dumps({"threads": threads, "candidate_us": 1e6 * statistics.median(candidate),
                      "reference_us": 1e6 * statistics.median(reference),
                      "speedup": statistics.median(r / c for c, r in taken),
                      "window_spread_median": statistics.median(spreads), "window_spread_max": max(spreads),
                      "assessment": found.model_dump()}))


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--shape", default="64x512", help="rows x cols of the layer-norm input")
    parser.add_argument("--neighbour", choices=sorted(NEIGHBOURS), default="spin")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--case", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--candidate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pinned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    if args.candidate:
        return candidate_worker(args.pinned, rows, cols)
    if args.case:
        return case_worker(args.pinned, args.pairs, args.window, rows, cols)
    results = [run_case(busy, pinned, args) for busy in (False, True) for pinned in (False, True)]
    print(f"{'machine':7} {'threads':11} {'ref us':>8} {'cand us':>8} {'speedup':>8} {'spread':>7} "
          f"{'win max':>8} {'others':>7} {'steal':>6}  contended")
    for r in results:
        a = r["assessment"]
        others = "-" if a["other_cores"] is None else f"{a['other_cores']:.2f}"
        steal = "-" if a["steal_share"] is None else f"{a['steal_share']:.3f}"
        print(f"{r['machine']:7} {r['mode'] + ' (' + str(r['threads']) + ')':11} {r['reference_us']:8.1f} {r['candidate_us']:8.1f} {r['speedup']:8.2f} {a['ratio_spread']:7.2f} "
              f"{r['window_spread_max']:8.2f} {others:>7} {steal:>6}  {a['contended']}")
    for r in results:
        for reason in r["assessment"]["reasons"]:
            print(f"  {r['machine']}/{r['mode']}: {reason}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
