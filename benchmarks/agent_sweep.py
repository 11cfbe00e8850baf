"""Agents side by side on one GPU: what the harness adds, and that timings never overlap.

A real `rooftop sweep` of `--agents` concurrent runs. Each run is the `command` adapter in the
agent sandbox playing a scripted agent: it copies the problem's bundled Triton solution into
its workspace, runs `./check`, then `./bench` twice. Everything an agent CLI would trigger
happens for real (workspace, gateway, bwrap, the service's queue and warm worker, grading on
visible and on all shapes); only the model is missing. Reported:

- per tool call, the latency an agent sees (`calls.jsonl`): queueing behind the other agents'
  calls included;
- per run, the agent's wall time outside its tool calls: sandbox start, the scripted agent's own
  shell, the clients of the two commands;
- the GPU evaluations' intervals (verdict start and wall time): overlapping pairs must be 0,
  since the service's one worker per GPU times one candidate at a time;
- visible against held-out speedup of each graded solution.

    python benchmarks/agent_sweep.py [--agents 6] [--problems examples/softmax,hard/topk,hard/accurate_softmax]
                                     [--repeats 2] [--device cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ("p=$(sed -n 's/^problem: //p' shapes.yaml); cp {root}/problems/$p/solutions/triton_*.py solution.py "
          "&& ./check && ./bench && ./bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=6, help="runs at once")
    parser.add_argument("--problems", default="examples/softmax,hard/topk,hard/accurate_softmax")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rooftop-agent-sweep-"))
    config = {
        "name": "agent-sweep-benchmark",
        "agents": [{"adapter": "command", "name": "scripted", "args": ["/bin/sh", "-c", SCRIPT.format(root=ROOT)],
                    "mounts": [str(ROOT / "problems")], "timeout": 900}],
        "problems": args.problems.split(","), "repeats": args.repeats, "concurrency": args.agents,
        "device": args.device, "db": str(work / "r.db"), "out": str(work / "runs"),
    }
    (work / "sweep.yaml").write_text(yaml.safe_dump(config))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rooftop", "sweep", str(work / "sweep.yaml"), "--json"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(done.stderr[-2000:])
    runs = json.loads(done.stdout)
    figures = summarise(runs, work / "r.db", wall, args.agents)
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


def summarise(runs: list[dict], db: Path, wall: float, agents: int) -> dict:
    per_run = [_calls_of(r) for r in runs]
    calls = [c for run_calls in per_run for c in run_calls]
    store = sqlite3.connect(db)
    intervals = []
    for (document,) in store.execute("SELECT verdict_json FROM evaluations"):
        verdict = json.loads(document)
        if (verdict.get("environment") or {}).get("device") == "cuda":
            start = datetime.datetime.fromisoformat(verdict["started_at"]).timestamp()
            intervals.append((start, start + verdict["wall_seconds"]))
    intervals.sort()
    overlaps = sum(1 for a, b in zip(intervals, intervals[1:]) if b[0] < a[1] - 1e-3)

    def spread(values: list[float]) -> dict:
        values = sorted(values)
        return {"n": len(values), "min": round(values[0], 3), "median": round(statistics.median(values), 3),
                "max": round(values[-1], 3)} if values else {"n": 0}

    per_tool = {tool: {"latency_s": spread([c["wall_s"] for c in calls if c["tool"] == tool])}
                for tool in ("check", "bench")}
    outside = [r["wall_s"] - sum(c["wall_s"] for c in run_calls) for r, run_calls in zip(runs, per_run)]
    return {
        "device": _device(), "runs": len(runs), "concurrency": agents, "sweep_wall_s": round(wall, 1),
        "tools": per_tool, "agent_time_outside_tools_s": spread(outside),
        "gpu_evaluations": len(intervals), "overlapping_gpu_evaluations": overlaps,
        "graded": [{"problem": r["problem"], "repeat": r["repeat"], "status": r["graded"]["status"],
                    "visible_speedup": r["visible"]["speedup"], "held_out_speedup": r["graded"]["held_out_speedup"],
                    "held_out": f"{r['graded']['held_out_correct']}/{r['graded']['held_out_shapes']}"} for r in runs],
    }


def _calls_of(run: dict) -> list[dict]:
    return [json.loads(line) for line in (Path(run["folder"]) / "calls.jsonl").read_text().splitlines()]


def _device() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or os.uname().machine
    except OSError:
        return os.uname().machine


if __name__ == "__main__":
    main()
