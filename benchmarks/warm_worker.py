"""A small problem's verdict through a warm device worker (`rooftop batch`) against a cold
`rooftop eval`, phase by phase.

The problem is benchmarks/kernelbench/small_linear_relu.py (a 23 us linear + ReLU). Cold: one
`rooftop eval` process per verdict, wall time measured from outside it (after one run that fills
the caches). Warm: N distinct copies of the same solution (a comment tells them apart, so each is
its own job) through one `rooftop batch`; each verdict's time is its evaluation's wall time in the
worker, whose trusted side, CUDA context and next child were already up. The first batch job pays
for the worker's start and is reported apart.

    python benchmarks/warm_worker.py [--runs 3] [--jobs 8] [--device cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBLEM = HERE / "kernelbench" / "small_linear_relu.py"
SOLUTION = HERE / "kernelbench" / "small_linear_relu_solution.py"
PHASES = ("child_start", "trusted_setup", "child_cuda_context", "gate_build", "gate_load", "gate_correctness",
          "gate_timing")


def rooftop(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"})
    return time.perf_counter() - started, proc


def cold(runs: int, device: str, folder: Path) -> list[dict]:
    db = folder / "cold.db"
    rooftop("eval", str(PROBLEM), str(SOLUTION), "--device", device, "--db", str(db), "--json")  # fills the caches
    out = []
    for _ in range(runs):
        wall, proc = rooftop("eval", str(PROBLEM), str(SOLUTION), "--device", device, "--db", str(db), "--json")
        verdict = json.loads(proc.stdout)
        out.append({"process_wall": wall, "status": verdict["status"], "evaluation": verdict["wall_seconds"],
                    "phases": {k: verdict["phases"].get(k) for k in PHASES}})
    return out


def warm(jobs: int, device: str, folder: Path) -> dict:
    lines = folder / "jobs.jsonl"
    source = SOLUTION.read_text()
    with lines.open("w") as f:
        for i in range(jobs):
            f.write(json.dumps({"problem": str(PROBLEM), "code": source + f"\n# copy {i} {time.time()}\n",
                                "name": f"copy{i}.py"}) + "\n")
    db = folder / "warm.db"
    wall, proc = rooftop("batch", str(lines), "--device", device, "--db", str(db), "--json")
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT j.run_wait_s, e.verdict_json FROM jobs j JOIN evaluations e "
                           "ON e.id = j.evaluation_id ORDER BY e.id").fetchall()
    verdicts = [(wait, json.loads(text)) for wait, text in rows]
    per_job = [{"status": v["status"], "evaluation": v["wall_seconds"], "run_wait": wait,
                "phases": {k: v["phases"].get(k) for k in PHASES}} for wait, v in verdicts]
    return {"batch_wall": wall, "jobs": per_job}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rooftop-warm-") as tmp:
        folder = Path(tmp)
        result = {"cold": cold(args.runs, args.device, folder), "warm": warm(args.jobs, args.device, folder)}
    cold_walls = [r["process_wall"] for r in result["cold"]]
    later = [j["evaluation"] for j in result["warm"]["jobs"][1:]]
    print(f"cold `rooftop eval`: process wall {min(cold_walls):.2f}-{max(cold_walls):.2f} s "
          f"(median {statistics.median(cold_walls):.2f}); statuses {[r['status'] for r in result['cold']]}")
    first = result["warm"]["jobs"][0]
    print(f"warm worker: first job {first['evaluation']:.2f} s; the next {len(later)}: "
          f"{min(later):.2f}-{max(later):.2f} s (median {statistics.median(later):.2f}); batch of "
          f"{len(result['warm']['jobs'])} in {result['warm']['batch_wall']:.1f} s; statuses "
          f"{sorted({j['status'] for j in result['warm']['jobs']})}")
    for name in PHASES:
        c = [r["phases"][name] for r in result["cold"] if r["phases"].get(name) is not None]
        w = [j["phases"][name] for j in result["warm"]["jobs"][1:] if j["phases"].get(name) is not None]
        print(f"  {name:22s} cold {statistics.median(c) if c else float('nan'):7.3f} s   "
              f"warm {statistics.median(w) if w else float('nan'):7.3f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
