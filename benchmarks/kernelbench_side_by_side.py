"""KernelBench's own evaluation and rooftop's, side by side, on KernelBench problem files at their
real sizes with plain `load_inline` solutions (benchmarks/kernelbench/).

For each problem: KernelBench's `eval_kernel_against_ref` (5 correctness trials, 100 timed trials,
CUDA events, as its scripts run it) in a fresh process, cold (an empty build folder) then warm
(the same folder); then `rooftop eval` cold (an empty build cache) then warm. Every figure is the
wall time of the whole process, measured here, with the status and the kernel time each reports.

    python benchmarks/kernelbench_side_by_side.py --kernelbench PATH [--problems 19 23] [--warm-runs 3]
        [--json out.json]

PATH is a KernelBench checkout (its KernelBench/level1 files and src/kernelbench). KernelBench's
package imports LLM client libraries at import time that evaluation never uses; where they are
missing, empty stand-ins are put in their place so that its evaluation code runs unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLUTIONS = {19: HERE / "kernelbench" / "relu_inline.py", 23: HERE / "kernelbench" / "softmax_inline.py"}

KB_RUNNER = r"""
import json, sys, types, time
for name in ("dotenv", "tqdm", "openai", "litellm", "requests"):
    try:
        __import__(name)
    except ImportError:
        stub = types.ModuleType(name)
        stub.load_dotenv = lambda *a, **k: None
        stub.tqdm = lambda x=None, *a, **k: x
        stub.OpenAI = object
        stub.completion = None
        sys.modules[name] = stub
sys.path.insert(0, sys.argv[1])
from kernelbench.eval import eval_kernel_against_ref
ref, sol, build = open(sys.argv[2]).read(), open(sys.argv[3]).read(), sys.argv[4]
result = eval_kernel_against_ref(ref, sol, seed_num=42, num_correct_trials=5, num_perf_trials=100,
                                 measure_performance=True, timing_method="cuda_event", build_dir=build,
                                 device=0, backend="cuda")
print("KBRESULT " + json.dumps({"compiled": result.compiled, "correctness": result.correctness,
                                "runtime_ms": result.runtime, "metadata": {k: str(v)[:200] for k, v in
                                (result.metadata or {}).items()}}))
"""


def kernelbench_eval(kb: Path, reference: Path, solution: Path, build: Path) -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", KB_RUNNER, str(kb / "src"), str(reference), str(solution),
                           str(build)], capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    line = next((x for x in proc.stdout.splitlines() if x.startswith("KBRESULT ")), None)
    out = json.loads(line[9:]) if line else {"error": (proc.stderr or proc.stdout)[-800:]}
    return {"harness": "kernelbench", "wall_s": round(wall, 2), **out}


def rooftop_eval(reference: Path, solution: Path, cache: Path) -> dict:
    env = {**os.environ, "ROOFTOP_CACHE": str(cache)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rooftop", "eval", str(reference), str(solution),
                           "--device", "cuda", "--json", "--db", str(cache / "rooftop.db")],
                          capture_output=True, text=True, timeout=900, env=env)
    wall = time.perf_counter() - started
    try:
        verdict = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"harness": "rooftop", "wall_s": round(wall, 2), "error": (proc.stderr or proc.stdout)[-800:]}
    shape = (verdict.get("shapes") or [{}])[0]
    cand = shape.get("candidate") or {}
    return {"harness": "rooftop", "wall_s": round(wall, 2), "status": verdict.get("status"),
            "median_ms": cand.get("median", 0) * 1e3 if cand.get("median") else None,
            "samples": cand.get("n"), "rse": cand.get("rse"), "stopped_by": cand.get("stopped_by"),
            "timed_calls": shape.get("timed_calls"), "timed_checks": shape.get("timed_checks"),
            "phases": verdict.get("phases"),
            "messages": verdict.get("messages", [])[:2], "warnings": verdict.get("warnings", [])[:3]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--problems", type=int, nargs="+", default=[19, 23])
    parser.add_argument("--only", choices=["kernelbench", "rooftop", "both"], default="both")
    parser.add_argument("--kernelbench-phases", nargs="+", default=["cold", "warm"], choices=["cold", "warm"],
                        help="which of KernelBench's runs to make (its time hardly depends on its build cache)")
    parser.add_argument("--warm-runs", type=int, default=1, help="rooftop runs with the warm cache")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for number in args.problems:
        [reference] = sorted((args.kernelbench / "KernelBench" / "level1").glob(f"{number}_*.py"))
        solution = SOLUTIONS[number]
        work = Path(tempfile.mkdtemp(prefix=f"kb-{number}-"))
        for phase in ("cold", "warm"):
            if args.only in ("kernelbench", "both") and phase in args.kernelbench_phases:
                row = kernelbench_eval(args.kernelbench, reference, solution, work / "kb-build")
                rows.append({"problem": reference.stem, "phase": phase, **row})
                print(json.dumps(rows[-1]), flush=True)
            if args.only in ("rooftop", "both"):
                for _ in range(args.warm_runs if phase == "warm" else 1):
                    row = rooftop_eval(reference, solution, work / "rooftop-cache")
                    rows.append({"problem": reference.stem, "phase": phase, **row})
                    print(json.dumps(rows[-1]), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
