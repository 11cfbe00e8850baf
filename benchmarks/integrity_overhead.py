"""What the integrity checks cost: wall time per evaluation with the checks on and off.

Checks on (the default): a fresh secret seed and fresh inputs for every call, every warm-up and
timed output probed, the dispatch audit on every call of a problem that forbids torch compute,
every call's kernels traced on every stream and held to its reported time, one call's kernels
listed per shape (the kernel share), tamper checks, the wall floor's no-op calls. Checks off: the
correctness seeds' inputs are made once and cycled through, no probes, no audits, no tracing —
what a naive harness does.
Both run the same engine (trusted reference, sandbox, child) on the bundled examples' correct
solutions, alternating on/off per solution so drift hits both.

    python benchmarks/integrity_overhead.py [--device cuda] [--repeats N] [--reverse-first] [--json out.json]
        [--only DECK_PROBLEM_OR_SOLUTION ...]
    python benchmarks/integrity_overhead.py --merge run1.json run2.json   # medians over separate runs

Three variants: checks off; checks on without a listed call; checks on with it (the default).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from rooftop.pipeline.evaluate import evaluate
from rooftop.problem.registry import bundled_names, expected_statuses, resolve
from rooftop.solution.loader import load_solution
from rooftop.vocabulary import Settings

ROOT = Path(__file__).resolve().parents[1]


def correct_solutions(device: str) -> list[tuple[str, Path]]:
    out = []
    for name in bundled_names():
        problem = resolve(name)
        folder = problem.root / "solutions"
        for entry, statuses in sorted(expected_statuses(problem).items()):
            if statuses.get(device) == "correct":
                out.append((name, folder / entry))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--reverse-first", action="store_true", help="start with the variants in reverse order")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--merge", type=Path, nargs="+", help="combine the --json files of separate runs")
    parser.add_argument("--only", nargs="+", help="only these problems or solution files (name, or problem/file)")
    args = parser.parse_args()
    if args.merge:
        _print_summary(_merge(args.merge))
        return
    rows = []
    for name, path in correct_solutions(args.device):
        names = {name, name.split("/")[0], path.name, path.stem, f"{name}/{path.name}", f"{name}/{path.stem}"}
        if args.only and not names & set(args.only):
            continue
        problem, solution = resolve(name), load_solution(path)
        if solution.needs_cuda:
            evaluate(problem, solution, Settings(device=args.device, timing=False, checks=False))  # build once
        variants = {"off": dict(checks=False), "checks": dict(checks=True, profile=False),
                    "checks+profile": dict(checks=True, profile=True)}
        walls: dict[str, list[float]] = {k: [] for k in variants}
        statuses = set()
        for r in range(args.repeats):
            for label in (list(variants) if (r + args.reverse_first) % 2 == 0 else list(reversed(variants))):
                started = time.monotonic()
                verdict = evaluate(problem, solution, Settings(device=args.device, **variants[label]))
                walls[label].append(time.monotonic() - started)
                statuses.add(verdict.status.value)
                if verdict.status.value != "correct":
                    print(f"  {name}/{path.name} [{label}] {verdict.status.value}: {' '.join(verdict.messages)[:300]}")
        row = {"problem": name, "solution": path.name, "statuses": sorted(statuses),
               **{f"{k}_s": statistics.median(v) for k, v in walls.items()}, "walls": walls}
        rows.append(row)
        print(f"{name:20s} {path.name:24s} " + "  ".join(f"{k} {row[k + '_s']:6.2f} s" for k in variants)
              + f"  checks {_pct(row['checks_s'], row['off_s'])}"
              f"  +profile {_pct(row['checks+profile_s'], row['off_s'])}"
              f"  {'/'.join(row['statuses'])}", flush=True)
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "summary": _summary(rows)}, indent=2))
    _print_summary(rows)


def _print_summary(rows: list[dict]) -> None:
    summary = _summary(rows)
    print(f"total: off {summary['off_s']:.1f} s, checks {summary['checks_s']:.1f} s "
          f"({100 * summary['checks_overhead']:+.1f}%), checks+profile {summary['checks+profile_s']:.1f} s "
          f"({100 * summary['profile_overhead']:+.1f}%)")


def _pct(on: float, off: float) -> str:
    return f"{100 * (on / off - 1):+6.1f}%"


def _merge(paths: list[Path]) -> list[dict]:
    """Rows of several runs, one per solution, with the median of all their evaluations."""
    merged: dict[tuple[str, str], dict] = {}
    for path in paths:
        for row in json.loads(path.read_text())["rows"]:
            walls = row.get("walls") or {k: [row[f"{k}_s"]] for k in ("off", "checks", "checks+profile")}
            into = merged.setdefault((row["problem"], row["solution"]), {
                "problem": row["problem"], "solution": row["solution"], "statuses": [],
                "walls": {k: [] for k in walls}})
            into["statuses"] = sorted(set(into["statuses"]) | set(row["statuses"]))
            for k, v in walls.items():
                into["walls"][k].extend(v)
    rows = list(merged.values())
    for row in rows:
        row.update({f"{k}_s": statistics.median(v) for k, v in row["walls"].items()})
        print(f"{row['problem']:20s} {row['solution']:24s} " + "  ".join(
            f"{k} {row[k + '_s']:6.2f} s (n={len(v)})" for k, v in row["walls"].items())
            + f"  checks {_pct(row['checks_s'], row['off_s'])}  +profile {_pct(row['checks+profile_s'], row['off_s'])}")
    return rows


def _summary(rows: list[dict]) -> dict:
    totals = {k: sum(r[k] for r in rows) for k in ("off_s", "checks_s", "checks+profile_s")}
    return {"solutions": len(rows), **totals, "checks_overhead": totals["checks_s"] / totals["off_s"] - 1,
            "profile_overhead": totals["checks+profile_s"] / totals["off_s"] - 1}


if __name__ == "__main__":
    main()
