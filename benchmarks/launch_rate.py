"""How fast a host queues a launch-bound call, process by process.

A whole network at a small batch (KernelBench level 3's RNNs, transformers and Swin models on an
H200) launches hundreds to thousands of kernels a call, and its host takes longer to queue them
than they take to run: the call's time is the launcher's. rooftop flags such a shape `host-bound`
and widens its interval by the spread between processes. This measures that spread with nothing
of the harness: each fresh process builds the problem's reference, makes one input set and times
calls with a bare CUDA event pair (`CudaEventClock`), reporting the median host time to queue a
call and the median event time, and the medians of blocks of ten calls (drift within a process).

    python benchmarks/launch_rate.py kernelbench/level3/29_SwinMLP [--processes 6] [--calls 80]
        [--cpus 0-15]   # bind every process to these CPUs (taskset), to see whether placement matters
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path


def worker(name: str, calls: int) -> dict[str, object]:
    import torch

    from rooftop.measure.timer import CudaEventClock
    from rooftop.problem.instance import ProblemInstance
    from rooftop.problem.registry import resolve

    problem = resolve(name)
    shape = problem.spec.shapes[0]
    device = torch.device("cuda", 0)
    instance = ProblemInstance(problem, device, 0)
    model = instance.model(shape)
    clock = CudaEventClock(device)
    inputs = instance.inputs(shape, 0)
    queued, times = [], []
    with torch.no_grad():
        for _ in range(calls):
            times.append(clock.time(lambda: model(*inputs)))
            queued.append(clock.last_queued)
    kept = queued[calls // 5:]  # the first fifth warms up
    return {"queued_ms": round(statistics.median(kept) * 1e3, 3),
            "time_ms": round(statistics.median(times[calls // 5:]) * 1e3, 3),
            "blocks_ms": [round(statistics.median(kept[i:i + 10]) * 1e3, 2) for i in range(0, len(kept), 10)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problem")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=80)
    parser.add_argument("--cpus", default="", help="a taskset CPU list every process is bound to")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.problem, args.calls)))
        return
    from rooftop.errors import UserError
    from rooftop.problem.registry import resolve

    try:
        resolve(args.problem)  # a wrong name is one line here, not a traceback from each process
    except UserError as exc:
        parser.error(str(exc))
    medians = []
    for i in range(args.processes):
        command = [sys.executable, str(Path(__file__).resolve()), args.problem, "--worker", "--calls", str(args.calls)]
        if args.cpus:
            command = ["taskset", "-c", args.cpus, *command]
        done = subprocess.run(command, capture_output=True, text=True, env=os.environ)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            print(f"process {i}: failed: {done.stderr.strip()[-400:]}", file=sys.stderr)
            continue
        row = json.loads(lines[-1])
        medians.append(row["queued_ms"])
        print(f"process {i}: queued {row['queued_ms']} ms, events {row['time_ms']} ms, blocks {row['blocks_ms']}",
              flush=True)
    if len(medians) > 1:
        print(f"{args.problem}: host time to queue a call, medians of {len(medians)} processes "
              f"{min(medians)}-{max(medians)} ms ({100 * (max(medians) / min(medians) - 1):.0f} % apart)")


if __name__ == "__main__":
    main()
