"""Scaling over the GPUs of one host: the same batch through `rooftop batch` on 1, 2, 4, ... GPUs.

The candidates are batch_throughput.py's (the examples deck's solutions and three mutations:
CUDA C++, Triton, PyTorch, a third of them broken), every one a distinct source, so every build is
cold. Each configuration gets the same candidates, an empty database and empty caches of its own,
and sees only its GPUs (CUDA_VISIBLE_DEVICES). A configuration is `GPUSxWORKERS` ("2" is 2 GPUs,
one worker each; "1x2" is one GPU with two workers, which take turns on it through the GPU's
lease) and, with `--backend ray`, runs through a local Ray instance instead of worker processes.

For each configuration the report gives:
- candidates per hour (from outside the `rooftop batch` process) and the parallel efficiency
  against the first configuration, per GPU;
- the GPU-busy share, two ways: NVML's utilisation of each GPU, sampled every 0.1 s while the
  batch runs (the share of time a kernel of any process was running: it counts the harness's own
  flush and spin kernels too), and, per device worker, the seconds of its correctness and timing
  gates (the gates whose calls run checked or timed kernels) over the batch's wall time, and the
  share it spent in evaluations at all (their verdicts' wall time; the rest it waited for builds
  or for work);
- where each device worker's wall went, from the queue's records: before its first job, inside
  verdicts, holding a job outside its verdict (its own steps between evaluations), with no job
  ready (builds behind), after its last verdict;
- each device's seconds in every phase of its verdicts, summed, to tell which step grows with
  the number of GPUs;
- the seconds the device workers' children spent building and importing, and how many compiled rather
  than importing what the build pool had built (each is GPU-worker time a build should not take);
- whether every candidate got the same status as in the first configuration, and whether each
  correct one's median time per shape lies within the other's 95 % interval of the median (the
  verdict's `ci_low`..`ci_high`), both ways, and whether the two intervals overlap at all, with
  the relative differences of the medians; those outside are listed. Give one configuration
  twice (`--configs 1,1`) for the run-to-run baseline.

With `--isolation`, one candidate is also timed on GPU 0 alone, then while the other GPUs run the
batch (with a configuration's caches, so they time rather than compile), then while they run bf16
GEMMs back to back (the most power and heat a neighbour can draw), then alone again, at
`--isolation-shapes` (default visible: kernels long enough for neighbours to matter): its median
per shape beside each load against its interval alone, beside the second lone run's. A load is
timed beside only once NVML has seen a kernel on every other GPU; its NVML share per GPU while the
probe ran is reported.

`--work DIR` keeps the candidates' tag and every configuration's results there: a later run with
the same DIR (and `--count`) makes the same candidates and is compared against the first
configuration ever run there, so configurations can be spread over several commands.

    python benchmarks/gpu_scaling.py [--configs 1,2,4] [--count 100] [--shapes tiny] [--timeout 60]
                                     [--backend local|ray] [--isolation [--isolation-loads batch,gemm]
                                     [--isolation-only]] [--work DIR] [--json out.json] [--device cuda|cpu]
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
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_throughput import ROOT, Candidate, make_candidates, path_env  # noqa: E402

BUSY_GATES = ("gate_correctness", "gate_timing")


def parse_config(text: str) -> tuple[int, int]:
    gpus, _, workers = text.partition("x")
    if not gpus.isdigit() or (workers and not workers.isdigit()) or int(gpus) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected GPUS or GPUSxWORKERS, e.g. 2 or 1x2")
    return int(gpus), int(workers or gpus)


class UtilizationSampler:
    """NVML's GPU utilisation of each GPU, every `every` seconds, on a thread."""

    def __init__(self, indices: list[int], every: float = 0.1) -> None:
        self.nvml, self.every, self.handles = None, every, []
        if indices:  # none: a CPU run, nothing to sample
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.handles = pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
        self.samples: list[list[int]] = [[] for _ in indices]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for handle, kept in zip(self.handles, self.samples):
                kept.append(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu)

    def __enter__(self) -> UtilizationSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def shares(self) -> list[float]:
        return [statistics.fmean(s) / 100 if s else 0.0 for s in self.samples]


def run_config(candidates: list[Candidate], gpus: int, workers: int, args: argparse.Namespace, work: Path,
               index: int) -> dict:
    name = f"{gpus}x{workers}" + ("-ray" if args.backend == "ray" else "") + f"#{index}"
    lines = work / "candidates.jsonl"
    db = work / f"{name}.db"
    env = path_env(work / f"cache-{name}")
    if args.device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    command = [sys.executable, "-m", "rooftop", "batch", str(lines), "--device", args.device, "--shapes", args.shapes,
               "--timeout", str(args.timeout), "--workers", str(workers), "--builders", str(args.builders),
               "--backend", args.backend, "--json", "--db", str(db)]
    print(f"{name}: {len(candidates)} candidates on {gpus} GPU(s), {workers} device worker(s)", flush=True)
    with UtilizationSampler(list(range(gpus)) if args.device == "cuda" else []) as sampler:
        started, started_at = time.perf_counter(), time.time()
        proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: rooftop batch failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    jobs = {j["solution"]: j for j in json.loads(proc.stdout)}
    ids = [j["evaluation_id"] for j in jobs.values() if j["evaluation_id"] is not None]
    with sqlite3.connect(db) as con:
        verdicts = {i: json.loads(text) for i, text in con.execute(
            f"SELECT id, verdict_json FROM evaluations WHERE id IN ({','.join('?' * len(ids))})", ids)} if ids else {}
        handled = con.execute("SELECT device, built_at, run_wait_s, updated_at, evaluation_id FROM jobs "
                              "WHERE device IS NOT NULL AND run_wait_s IS NOT NULL").fetchall()
    rows, held = [], dict[str, float]()
    phases: dict[str, dict[str, float]] = {}  # per device: seconds in each phase of its verdicts, summed
    for c in candidates:
        job = jobs[str(c.path)]
        verdict = verdicts.get(job["evaluation_id"]) or {}
        if job["device"] is not None and verdict:
            held[job["device"]] = held.get(job["device"], 0.0) + verdict.get("wall_seconds", 0.0)
            mine = phases.setdefault(job["device"], {})
            for phase, seconds in verdict.get("phases", {}).items():
                mine[phase] = mine.get(phase, 0.0) + seconds
        times = {s["shape"]: [s["candidate"][k] for k in ("median", "ci_low", "ci_high")]
                 for s in verdict.get("shapes", []) if s.get("candidate") and s["candidate"].get("samples")}
        build = next((g for g in verdict.get("gates", []) if g.get("gate") == "build"), None)
        # the device child's build and import: the pool built it, so anything but a cached import is GPU time lost
        device_build = verdict.get("phases", {}).get("build", 0.0) if job["device"] is not None else 0.0
        rows.append({"candidate": c.name, "status": job["status"] or f"no verdict ({job['state']})",
                     "device": job["device"], "times": times,
                     "device_wait_s": verdict.get("phases", {}).get("device_wait", 0.0),
                     "device_build_s": device_build,
                     "compiled_on_device": bool(job["device"] and build and build.get("cached") is False)})
    done = sum(1 for r in rows if not r["status"].startswith("no verdict"))
    timeline = worker_timeline([(device, built + waited, datetime.fromisoformat(ended).timestamp() - started_at,
                                 (verdicts.get(ident) or {}).get("wall_seconds", 0.0))
                                for device, built, waited, ended, ident in handled], started_at, wall)
    return {"name": name, "gpus": gpus, "workers": workers, "backend": args.backend, "wall_s": wall,
            "candidates": len(rows), "with_verdict": done, "candidates_per_hour": 3600 * len(rows) / wall,
            "nvml_busy_share": sampler.shares(), "gate_busy_share": {d: sum(p.get(g, 0.0) for g in BUSY_GATES) / wall
                                                                  for d, p in sorted(phases.items())},
            "evaluating_share": {d: s / wall for d, s in sorted(held.items())},
            "waited_for_gpu": sum(1 for r in rows if r["device_wait_s"] > 0),
            "device_build_s": sum(r["device_build_s"] for r in rows),
            "compiled_on_device": sum(1 for r in rows if r["compiled_on_device"]), "timeline": timeline,
            "verdict_phases_s": {d: dict(sorted(p.items())) for d, p in sorted(phases.items())}, "rows": rows}


def worker_timeline(jobs: list[tuple[str, float, float, float]], started_at: float, wall: float) -> dict[str, dict]:
    """Where each device worker's wall went, from the queue's records of its jobs (device, epoch it
    claimed the job, seconds from the batch's start to its verdict, the verdict's own seconds):
    before its first claim (the batch's, the workers' and the first builds' start), inside verdicts,
    holding a claimed job outside its verdict (the worker's own steps between two evaluations),
    waiting with no job (the builds had none ready), and after its last verdict."""
    out: dict[str, dict] = {}
    for device in sorted({d for d, *_ in jobs}):
        mine = sorted(((c - started_at, e, w) for d, c, e, w in jobs if d == device), key=lambda j: j[1])
        inside = holding = starved = 0.0
        previous = mine[0][0]
        for claimed, ended, verdict_s in mine:
            starved += max(0.0, claimed - previous)
            inside += verdict_s
            holding += max(0.0, ended - max(previous, claimed) - verdict_s)
            previous = ended
        out[device] = {"before_first_s": mine[0][0], "verdicts_s": inside, "between_verdicts_s": holding,
                       "no_job_s": starved, "after_last_s": wall - previous}
    return out


def compare(base: dict, other: dict) -> dict:
    """Same status per candidate; each correct one's medians within the other's interval, both ways."""
    status_differs, time_differs, relative, overlapping = [], [], [], 0
    for a, b in zip(base["rows"], other["rows"]):
        if a["status"] != b["status"]:
            status_differs.append(f"{a['candidate']}: {a['status']} vs {b['status']}")
            continue
        for shape in sorted(set(a["times"]) & set(b["times"])):
            (ma, la, ha), (mb, lb, hb) = a["times"][shape], b["times"][shape]
            relative.append(abs(mb - ma) / ma)
            overlapping += int(la <= hb and lb <= ha)
            if not (lb <= ma <= hb and la <= mb <= ha):
                time_differs.append(f"{a['candidate']} {shape}: {ma * 1e6:.1f} us [{la * 1e6:.1f}, {ha * 1e6:.1f}] "
                                    f"vs {mb * 1e6:.1f} us [{lb * 1e6:.1f}, {hb * 1e6:.1f}]")
    return {"status_differs": status_differs, "timings_compared": len(relative),
            "timing_outside_interval": time_differs, "intervals_overlapping": overlapping,
            "median_relative_difference": statistics.median(relative) if relative else None,
            "max_relative_difference": max(relative) if relative else None}


# a neighbour at its worst: bf16 GEMMs back to back, the most power and heat a GPU beside can draw
GEMM_LOAD = ("import torch\n"
             "a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
             "while True:\n"
             "    for _ in range(20): b = a @ a\n"
             "    torch.cuda.synchronize()\n")


def wait_until_busy(indices: list[int], seconds: float) -> float | None:
    """Seconds until NVML has seen a kernel on every GPU of `indices` (None: not within `seconds`)."""
    import pynvml

    pynvml.nvmlInit()
    handles, seen, started = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices], set(), time.perf_counter()
    while time.perf_counter() - started < seconds:
        seen |= {i for i, h in zip(indices, handles) if pynvml.nvmlDeviceGetUtilizationRates(h).gpu > 0}
        if len(seen) == len(indices):
            return time.perf_counter() - started
        time.sleep(0.2)
    return None


def job_states(db: Path) -> dict[str, int]:
    """How many of a batch's jobs are in each state (a load that never reached its GPU: where they stand)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return dict(con.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())
    except sqlite3.Error:
        return {}


def isolation(candidates: list[Candidate], gpus: int, args: argparse.Namespace, work: Path,
              warm: Path | None) -> dict:
    """One correct candidate timed on GPU 0 alone, then while GPUs 1.. run the batch, then while they
    run back-to-back GEMMs, then alone again: the two lone runs give the run-to-run spread that the
    neighbours' effect is read against. Each neighbour load is timed beside only once NVML has seen
    it on every other GPU. The batch neighbours reuse `warm` (a configuration's caches) where given,
    so they time rather than compile."""
    gpu = args.device == "cuda"  # a CPU run tries the steps with CPU workers and a PyTorch probe
    wanted = "cuda_softmax" if gpu else "pytorch_softmax"
    probe = next((c for c in candidates if c.template.name == wanted), None)
    if probe is None:
        raise SystemExit(f"--isolation: the probe ({wanted}) is not among {len(candidates)} candidates; raise --count")
    env = {**path_env(work / "cache-isolation"), **({"CUDA_VISIBLE_DEVICES": "0"} if gpu else {})}
    others = list(range(1, gpus))

    def timed(label: str) -> dict[str, list[float]]:
        command = [sys.executable, "-m", "rooftop", "eval", probe.problem, str(probe.path), "--device", args.device,
                   "--shapes", args.isolation_shapes, "--json", "--db", str(work / f"isolation-{label}.db")]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"isolation ({label}): rooftop eval failed (exit {proc.returncode}):\n"
                             f"{proc.stderr[-3000:]}")
        verdict = json.loads(proc.stdout)
        return {s["shape"]: [s["candidate"][k] for k in ("median", "ci_low", "ci_high")]
                for s in verdict["shapes"] if s.get("candidate")}

    def beside(load: str) -> dict:
        log = (work / f"neighbours-{load}.log").open("w")
        if load == "batch":
            busy_env = {**path_env(warm or work / "cache-neighbours"),
                        **({"CUDA_VISIBLE_DEVICES": ",".join(map(str, others))} if gpu else {})}
            procs = [subprocess.Popen([sys.executable, "-m", "rooftop", "batch", str(work / "candidates.jsonl"),
                                       "--device", args.device, "--shapes", args.isolation_shapes, "--workers",
                                       str(gpus - 1), "--builders", str(args.builders), "--json", "--db",
                                       str(work / "neighbours.db")], env=busy_env, cwd=ROOT,
                                      stdout=subprocess.DEVNULL, stderr=log)]
        else:
            procs = [subprocess.Popen([sys.executable, "-c", GEMM_LOAD], stdout=subprocess.DEVNULL, stderr=log,
                                      env={**os.environ, "CUDA_VISIBLE_DEVICES": str(i)}) for i in others]
        try:
            # the batch's workers and builders start torch first (tens of seconds beside 40 builders)
            busy_after = wait_until_busy(others, 180) if gpu else None
            if gpu and busy_after is None:
                print(f"isolation: the {load} load never showed on GPUs {others} in 180 s; its jobs: "
                      f"{job_states(work / 'neighbours.db') if load == 'batch' else '-'}", flush=True)
            with UtilizationSampler(list(range(gpus)) if gpu else []) as sampler:
                time.sleep(5)
                times = timed(f"beside-{load}")
        finally:
            still_running = all(p.poll() is None for p in procs)
            for p in procs:
                p.kill()
                p.wait()
            log.close()
        return {"times": times, "neighbours_busy_after_s": busy_after, "neighbours_ran_throughout": still_running,
                "busy_share_per_gpu": sampler.shares(), **({"neighbour_jobs": job_states(work / "neighbours.db")}
                                                           if load == "batch" else {})}

    alone = timed("alone")
    loads = {load: beside(load) for load in args.isolation_loads if gpu or load == "batch"}
    again = timed("alone-again")
    shapes: dict[str, dict] = {}
    for shape, (median, low, high) in alone.items():
        row = shapes[shape] = {"alone_us": median * 1e6, "alone_interval_us": [low * 1e6, high * 1e6]}
        for label, med in [*((f"beside_{k}", v["times"][shape][0]) for k, v in loads.items()),
                           ("alone_again", again[shape][0])]:
            row |= {f"{label}_us": med * 1e6, f"{label}_within": low <= med <= high,
                    f"{label}_relative": med / median - 1}
    return {"candidate": probe.name, "shapes_group": args.isolation_shapes, "neighbour_gpus": others,
            "loads": {k: {n: x for n, x in v.items() if n != "times"} for k, v in loads.items()}, "shapes": shapes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="1", help="comma-separated GPUS or GPUSxWORKERS (default 1)")
    parser.add_argument("--count", type=int, default=100, help="candidates (default 100)")
    parser.add_argument("--shapes", default="tiny", help="shape group or names (default tiny)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per gate (default 60)")
    parser.add_argument("--builders", type=int, default=4, help="build workers (default 4)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: CPU device workers stand for the GPUs, to try the script on a machine without one")
    parser.add_argument("--isolation", action="store_true",
                        help="time one candidate alone and beside loads on the other GPUs")
    parser.add_argument("--isolation-shapes", default="visible",
                        help="the shapes the isolation probe and its neighbours run (default visible)")
    parser.add_argument("--isolation-loads", default="batch,gemm", type=lambda t: [x for x in t.split(",") if x],
                        help="the neighbours' loads, in order: batch, gemm or both (default batch,gemm)")
    parser.add_argument("--isolation-only", action="store_true", help="skip the configurations; only --isolation")
    parser.add_argument("--work", type=Path, help="keep candidates and results here, to add configurations later")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    if not args.isolation_loads or set(args.isolation_loads) - {"batch", "gemm"}:
        parser.error(f"--isolation-loads: expected batch, gemm or batch,gemm, got {','.join(args.isolation_loads)!r}")
    if args.isolation_only and not args.isolation:
        parser.error("--isolation-only: give --isolation too")
    try:
        configs = [parse_config(c.strip()) for c in args.configs.split(",") if c.strip()]
    except argparse.ArgumentTypeError as exc:
        parser.error(f"--configs: {exc}")
    import torch

    present = torch.cuda.device_count() if args.device == "cuda" else len(os.sched_getaffinity(0))
    if not configs or max(g for g, _ in configs) > present:
        parser.error(f"--configs {args.configs}: this machine has {present} {args.device.upper()}(s)")
    work = args.work or Path(tempfile.mkdtemp(prefix="rooftop-scaling-"))
    (work / "runs").mkdir(parents=True, exist_ok=True)
    tag_file = work / "tag"
    if not tag_file.exists():
        tag_file.write_text(f"{os.getpid()}-{time.time():.0f}")
    earlier = [json.loads(f.read_text()) for f in sorted((work / "runs").glob("*.json"))]
    if earlier and earlier[0]["candidates"] != args.count:
        parser.error(f"--count {args.count}: the runs in {work} had {earlier[0]['candidates']} candidates")
    # a configuration cut short left its folder and database behind: the next ones number past it,
    # so that no run resumes another's jobs
    left = [int(f.name.split("-")[1]) for f in work.glob("candidates-*")] + \
        [int(f.stem.rsplit("#", 1)[1]) for f in work.glob("*#*.db")]
    first = 1 + max([len(earlier), *left])
    # the same tag makes the same sources; a folder of their own keeps this run's paths apart
    candidates = make_candidates(args.count, work / f"candidates-{first}", tag_file.read_text())
    (work / "candidates.jsonl").write_text("".join(json.dumps({"problem": c.problem, "solution": str(c.path)}) + "\n"
                                                   for c in candidates))
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else f"CPU ({present} cores)"
    report: dict = {"device": name, "torch": torch.__version__,
                    "date": time.strftime("%Y-%m-%d"), "count": args.count, "shapes": args.shapes, "runs": []}
    base: dict | None = earlier[0] if earlier else None
    for i, (gpus, workers) in enumerate([] if args.isolation_only else configs, first):
        run = run_config(candidates, gpus, workers, args, work, i)
        (work / "runs" / f"{i:02d}.json").write_text(json.dumps(run))
        base = base or run
        per_gpu = run["candidates_per_hour"] / run["gpus"]
        summary = {k: v for k, v in run.items() if k != "rows"}
        summary["efficiency"] = per_gpu / (base["candidates_per_hour"] / base["gpus"])
        summary["against_first"] = compare(base, run) if run is not base else None
        report["runs"].append(summary)
        print(f"{run['name']:>8}: {run['wall_s']:7.1f} s, {run['candidates_per_hour']:7.0f}/h, efficiency "
              f"{summary['efficiency']:.2f}, NVML busy {', '.join(f'{s:.0%}' for s in run['nvml_busy_share'])}, "
              f"gates busy {', '.join(f'{s:.0%}' for s in run['gate_busy_share'].values())}, "
              f"evaluating {', '.join(f'{s:.0%}' for s in run['evaluating_share'].values())}, "
              f"{run['with_verdict']}/{run['candidates']} verdicts, {run['waited_for_gpu']} waited for a GPU, "
              f"builds on the GPUs {run['device_build_s']:.1f} s ({run['compiled_on_device']} compiled there)",
              flush=True)
        for device, parts in run["timeline"].items():
            print(f"          {device}: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.1f} s"
                                                     for k, v in parts.items()), flush=True)
            print("            in verdicts: " + ", ".join(f"{k} {v:.1f} s" for k, v in
                                                          run["verdict_phases_s"].get(device, {}).items()), flush=True)
        if summary["against_first"]:
            diff = summary["against_first"]
            spread = (f"; medians differ by {diff['median_relative_difference']:.1%} (median), "
                      f"{diff['max_relative_difference']:.1%} (max)") if diff["timings_compared"] else ""
            print(f"          against {base['name']}: {len(diff['status_differs'])} statuses differ; "
                  f"{len(diff['timing_outside_interval'])} of {diff['timings_compared']} timings outside the "
                  f"other's interval ({diff['intervals_overlapping']} intervals overlap){spread}", flush=True)
            for line in diff["status_differs"] + diff["timing_outside_interval"]:
                print(f"            {line}", flush=True)
        if args.json:  # after every configuration: a run cut short keeps what it measured
            args.json.write_text(json.dumps(report, indent=2))
    if args.isolation:
        if present < 2:
            report["isolation"] = "needs 2 or more GPUs"
        else:
            caches = sorted(work.glob("cache-*x*"))  # a configuration's: its builds are done
            report["isolation"] = isolation(candidates, present, args, work, caches[-1] if caches else None)
        print(f"isolation: {json.dumps(report['isolation'])}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
