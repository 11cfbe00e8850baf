"""What the integrity checks cost: wall time per evaluation with the checks on and off.

Checks on (the default): a fresh secret seed and fresh inputs for every call, every warm-up and
timed output probed, the dispatch audit on the full checks and a random eighth of the other
calls, a profiled call per shape, tamper checks. Checks off: the correctness seeds' inputs are
made once and cycled through, no probes, no audits, no profile pass — what a naive harness does.
Both run the same engine (trusted reference, sandbox, child) on the bundled examples' correct
solutions, alternating on/off per solution so drift hits both.

    python benchmarks/integrity_overhead.py [--device cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import yaml

from rooftop.pipeline.evaluate import evaluate
from rooftop.pipeline.job import Settings
from rooftop.problem.registry import bundled_names, resolve
from rooftop.solution.loader import load_solution

ROOT = Path(__file__).resolve().parents[1]


def correct_solutions(device: str) -> list[tuple[str, Path]]:
    out = []
    for name in bundled_names():
        problem = resolve(name)
        folder = problem.root / "solutions"
        expected = yaml.safe_load((folder / "expected.yaml").read_text()) or {}
        for entry, statuses in sorted(expected.items()):
            if statuses.get(device) == "correct":
                out.append((name, folder / entry))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for name, path in correct_solutions(args.device):
        problem, solution = resolve(name), load_solution(path)
        evaluate(problem, solution, Settings(device=args.device, timing=False, checks=False))  # builds, caches
        walls: dict[bool, list[float]] = {True: [], False: []}
        statuses = set()
        for r in range(args.repeats):
            for checks in ((True, False) if r % 2 == 0 else (False, True)):
                started = time.monotonic()
                verdict = evaluate(problem, solution, Settings(device=args.device, checks=checks))
                walls[checks].append(time.monotonic() - started)
                statuses.add(verdict.status.value)
        on, off = statistics.median(walls[True]), statistics.median(walls[False])
        row = {"problem": name, "solution": path.name, "on_s": on, "off_s": off, "overhead": on / off - 1,
               "statuses": sorted(statuses), "timed_checks": sum(s.timed_checks for s in verdict.shapes)}
        rows.append(row)
        print(f"{name:12s} {path.name:24s} on {on:6.2f} s  off {off:6.2f} s  overhead {100 * row['overhead']:+6.1f}%"
              f"  {'/'.join(row['statuses'])}", flush=True)
    total_on, total_off = sum(r["on_s"] for r in rows), sum(r["off_s"] for r in rows)
    summary = {"solutions": len(rows), "total_on_s": total_on, "total_off_s": total_off,
               "overhead": total_on / total_off - 1,
               "median_overhead": statistics.median(r["overhead"] for r in rows)}
    print(f"total on {total_on:.1f} s, off {total_off:.1f} s: overhead {100 * summary['overhead']:+.1f}% "
          f"(median per solution {100 * summary['median_overhead']:+.1f}%)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
