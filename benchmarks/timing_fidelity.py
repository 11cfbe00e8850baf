"""How close rooftop's kernel timings are to Nsight Compute's, how reproducible, and at what cost.

A score is only as good as the time under it. Single library calls (elementwise, copy, reductions,
softmax, layer norm, GEMMs, a convolution; about 5 µs to 10 ms on an H200) are timed four ways:

- rooftop's in-process loop (`rooftop.measure.loop.measure`): fresh inputs from a pool for every
  call, L2 flushed before each call, one CUDA event pair per call, adaptive stopping, the median;
- Nsight Compute as ground truth: `gpu__time_duration.sum` summed over one call's kernels, median
  over K calls, with `--clock-control none` (clocks never locked, as in rooftop) and
  `--cache-control all` (caches flushed before each kernel): both measure cold-cache kernel time;
- peers' methods, from their documentation: KernelBench's (3 warm-up calls, 100 trials of event
  pair + synchronize on the same inputs, no flush, the mean) and Triton's own `do_bench` (defaults);
- all three methods in several fresh processes, for the spread of each figure between processes
  and the wall time each spent, next to the RSE of the median that a fixed 100-trial run reaches.

    python benchmarks/timing_fidelity.py --json out.json --markdown out.md [--cases add_16m,mm_8192]
    python benchmarks/timing_fidelity.py --device cpu --quick      # smoke run of the whole flow
    python benchmarks/timing_fidelity.py --self-check              # the ncu CSV parser on a sample

The parent never touches the GPU. Workers (`--repro-worker`) time every case with every method;
one more (`--ncu-worker`) runs under ncu and opens each case and each call with a tiny Triton
kernel whose name the parent finds in ncu's kernel list.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

from rooftop.measure.clocks import SmClock
from rooftop.measure.loop import measure
from rooftop.measure.measurement import relative_standard_error
from rooftop.measure.stopping import TimingPolicy
from rooftop.measure.timer import Clock, clock_for

SCRIPT = str(Path(__file__).resolve())
METHODS = ("ours", "kernelbench", "do_bench")
NCU_FLAGS = ["--clock-control", "none", "--cache-control", "all", "--metrics", "gpu__time_duration.sum",
             "--csv", "--print-units", "base", "--profile-from-start", "off"]
CALL_MARKER, CASE_MARKER = "rooftop_fidelity_marker_call", "rooftop_fidelity_marker_case"
UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0, "s": 1.0}
LONG = 50e-6  # the fidelity and spread targets are tighter from this duration on


@triton.jit
def rooftop_fidelity_marker_call(flag):
    tl.store(flag, 1)


@triton.jit
def rooftop_fidelity_marker_case(flag):
    tl.store(flag, 2)


@dataclass
class Case:
    make: Callable[[], list[torch.Tensor]]  # a fresh set of inputs
    fn: Callable[..., Any]  # one library call on them


def build_cases(device: torch.device, quick: bool) -> dict[str, Case]:
    """The kernels; the times are rough guesses for an H200 (HBM3e ~4.8 TB/s, ~990 dense fp16 TFLOP/s)."""
    def size(full: int, tiny: int) -> int:
        return tiny if quick else full

    def rand(*shape: int, dtype: torch.dtype = torch.float32, channels_last: bool = False) -> torch.Tensor:
        t = torch.randn(*shape, dtype=dtype, device=device)
        return t.to(memory_format=torch.channels_last) if channels_last else t

    def empty(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.empty(*shape, dtype=dtype, device=device)

    def add(n: int) -> Case:
        return Case(lambda: [rand(n), rand(n), empty(n)], lambda a, b, c: torch.add(a, b, out=c))

    def mm(m: int, n: int, k: int, dtype: torch.dtype = torch.float16) -> Case:
        return Case(lambda: [rand(m, k, dtype=dtype), rand(k, n, dtype=dtype), empty(m, n, dtype=dtype)],
                    lambda a, b, c: torch.mm(a, b, out=c))

    h, bf = torch.float16, torch.bfloat16
    n_copy, (s_rows, s_cols), s_soft, (ln_rows, ln_cols) = \
        size(1 << 29, 4096), (size(16384, 64), size(8192, 64)), size(4096, 64), (size(8192, 64), size(4096, 64))
    batch, chans, hw = size(64, 2), size(64, 8), size(56, 8)
    return {
        "add_256k": add(size(1 << 18, 1024)),  # fp32, 3 MiB moved: ~4 µs, launch-bound
        "add_16m": add(size(1 << 24, 4096)),  # fp32, 192 MiB: ~50 µs
        "add_128m": add(size(1 << 27, 16384)),  # fp32, 1.5 GiB: ~350 µs
        # 1 GiB bf16 -> fp16: a same-dtype copy_ is a cudaMemcpy, which ncu does not profile: ~500 µs
        "copy_1g": Case(lambda: [empty(n_copy, dtype=h), rand(n_copy, dtype=bf)], lambda dst, src: dst.copy_(src)),
        "sum_rows": Case(lambda: [rand(s_rows, s_cols), empty(s_rows)],  # 512 MiB fp32: ~130 µs
                         lambda x, y: torch.sum(x, dim=-1, out=y)),
        "softmax": Case(lambda: [rand(s_soft, s_soft, dtype=h)], lambda x: torch.softmax(x, dim=-1)),  # ~20 µs
        "layer_norm": Case(lambda: [rand(ln_rows, ln_cols, dtype=bf), rand(ln_cols, dtype=bf), rand(ln_cols, dtype=bf)],
                           lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b)),  # 128 MiB moved: ~40 µs
        "conv_resnet": Case(lambda: [rand(batch, chans, hw, hw, dtype=h, channels_last=True),  # 15 GFLOP: ~40 µs
                                     rand(chans, chans, 3, 3, dtype=h, channels_last=True)],
                            lambda x, w: F.conv2d(x, w, padding=1)),
        "mm_512": mm(*[size(512, 32)] * 3),  # fp16, 0.27 GFLOP: ~7 µs
        "mm_2048": mm(*[size(2048, 48)] * 3),  # fp16, 17 GFLOP: ~30 µs
        "mm_8192": mm(*[size(8192, 64)] * 3),  # fp16, 1.1 TFLOP: ~1.6 ms
        "mm_16k": mm(size(16384, 64), size(16384, 64), size(12288, 48)),  # fp16, 6.6 TFLOP: ~9 ms
        "mm_fp32_4096": mm(*[size(4096, 64)] * 3, dtype=torch.float32),  # IEEE fp32 (no TF32), 137 GFLOP: ~2.7 ms
    }


def make_policy(device: str, max_seconds: float, min_wall_seconds: float | None = None) -> TimingPolicy:
    if device == "cpu":
        return TimingPolicy.for_device("cpu")
    extra = {} if min_wall_seconds is None else {"min_wall_seconds": min_wall_seconds}
    return TimingPolicy(max_seconds=max_seconds, **extra)


def policy_note(policy: TimingPolicy, device: str) -> str:
    if device == "cpu":
        return "TimingPolicy.for_device('cpu')"
    default = TimingPolicy().model_dump()
    changed = {k: v for k, v in policy.model_dump().items() if v != default[k]}
    return "GPU default" if not changed else "default but " + ", ".join(f"{k}={v}" for k, v in changed.items())


def environment(device: torch.device) -> dict[str, Any]:
    try:
        driver_line = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        driver_line = ""
    found = re.search(r"\s(\d{3,}\.\d+(?:\.\d+)?)\s", driver_line)
    return {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
            "driver": found.group(1) if found else None, "driver_line": driver_line, "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}


# ---- the methods, each timing one case in a worker ----

def ours(case: Case, device: torch.device, policy: TimingPolicy, clock: Clock, sm: SmClock | None) -> dict[str, Any]:
    memory = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    stats = measure(case.fn, case.make, policy, clock, sm_clock=sm, memory_bytes=memory)
    return {"figure_s": stats.median, "n": stats.n, "rse": stats.rse, "stopped_by": stats.stopped_by,
            "ci_low_s": stats.ci_low, "ci_high_s": stats.ci_high, "low_clock_dropped": stats.low_clock_dropped,
            "clock_median_mhz": stats.clock_median_mhz, "samples_s": stats.samples}


def kernelbench_style(case: Case, device: torch.device) -> dict[str, Any]:
    """3 warm-up calls, then 100 trials of (start event, call, end event, synchronize) on the same
    inputs with no cache flush; the mean is the figure. On the CPU, perf_counter replaces the events."""
    inputs = case.make()
    for _ in range(3):
        case.fn(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    samples = [_one_trial(lambda: case.fn(*inputs), device) for _ in range(100)]
    rse = relative_standard_error(sorted(samples))
    return {"figure_s": statistics.fmean(samples), "median_s": statistics.median(samples),
            "rse": None if math.isinf(rse) else rse, "samples_s": samples}


def _one_trial(call: Callable[[], Any], device: torch.device) -> float:
    if device.type != "cuda":
        began = time.perf_counter()
        call()
        return time.perf_counter() - began
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3


def do_bench(case: Case) -> dict[str, Any]:
    inputs = case.make()
    return {"figure_s": triton.testing.do_bench(lambda: case.fn(*inputs)) / 1e3}  # ms, mean over its runs


def repro_worker(args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    torch.set_float32_matmul_precision("highest")  # fp32 GEMMs in IEEE fp32, no TF32
    cases, clock = build_cases(device, args.quick), clock_for(device)
    policy = make_policy(args.device, args.max_seconds, args.min_wall_seconds)
    sm, why = SmClock.open(device) if device.type == "cuda" else (None, "not a GPU")
    methods = [m for m in METHODS if device.type == "cuda" or m != "do_bench"]
    order = methods[args.index % len(methods):] + methods[:args.index % len(methods)]  # drift hits each method
    out: dict[str, Any] = {"index": args.index, "env": environment(device), "order": order, "sm_clock": why or
                           sm.max_mhz, "cases": {}}
    try:  # Triton's driver set up outside any wall
        if device.type == "cuda":
            triton.testing.do_bench(lambda: None, warmup=1, rep=1)
    except Exception:  # noqa: BLE001 (do_bench then reports it per case)
        pass
    with torch.no_grad():
        for name in args.cases.split(","):
            entry: dict[str, Any] = {}
            try:  # one untimed call, so that no method's wall pays for a library's first use (cuDNN, cuBLAS)
                cases[name].fn(*cases[name].make())
            except Exception:  # noqa: BLE001 (each method then reports the error)
                pass
            for method in order:
                began = time.perf_counter()
                try:
                    entry[method] = ours(cases[name], device, policy, clock, sm) if method == "ours" else \
                        kernelbench_style(cases[name], device) if method == "kernelbench" else do_bench(cases[name])
                except Exception as exc:  # noqa: BLE001 (an OOM or a missing kernel is a result too)
                    entry[method] = {"error": f"{type(exc).__name__}: {exc}"}
                entry[method]["wall_s"] = time.perf_counter() - began
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            out["cases"][name] = entry
    args.out.write_text(json.dumps(out))


def ncu_worker(args: argparse.Namespace) -> None:
    """Each case warmed up, then inside one profiler range: a case marker and K times (call marker, call)."""
    device = torch.device("cuda")
    torch.set_float32_matmul_precision("highest")
    cases, cudart = build_cases(device, args.quick), torch.cuda.cudart()
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    plan: dict[str, Any] = {"calls": args.calls, "cases": [], "errors": {}}
    rooftop_fidelity_marker_case[(1,)](flag)  # compiled before any profiling
    rooftop_fidelity_marker_call[(1,)](flag)
    with torch.no_grad():
        for name in args.cases.split(","):
            try:
                inputs = cases[name].make()
                for _ in range(3):
                    cases[name].fn(*inputs)
                torch.cuda.synchronize()
                cudart.cudaProfilerStart()
                try:
                    plan["cases"].append(name)  # the parent pairs case markers with this list, in order
                    rooftop_fidelity_marker_case[(1,)](flag)
                    for _ in range(args.calls):
                        rooftop_fidelity_marker_call[(1,)](flag)
                        cases[name].fn(*inputs)
                    torch.cuda.synchronize()
                finally:
                    cudart.cudaProfilerStop()
            except Exception as exc:  # noqa: BLE001
                plan["errors"][name] = f"{type(exc).__name__}: {exc}"
            inputs = []
            torch.cuda.empty_cache()
    args.out.write_text(json.dumps(plan))


# ---- ncu's output ----

def parse_ncu_csv(text: str) -> list[tuple[str, float]]:
    """(kernel name, seconds) for each profiled kernel, in profiling order, from ncu's --csv output
    (other lines, such as ==PROF== ones, are skipped; values may have thousands separators)."""
    header: dict[str, int] | None = None
    kernels = []
    for line in text.splitlines():
        if not line.startswith('"'):
            continue
        fields = next(csv.reader([line]))
        if header is None:
            if {"Kernel Name", "Metric Name", "Metric Value"} <= set(fields):
                header = {field: i for i, field in enumerate(fields)}
            continue
        if len(fields) != len(header) or fields[header["Metric Name"]] != "gpu__time_duration.sum":
            continue
        unit = fields[header["Metric Unit"]] if "Metric Unit" in header else "nsecond"
        try:
            seconds = float(fields[header["Metric Value"]].replace(",", "")) * UNITS[unit]
        except (ValueError, KeyError):
            seconds = math.nan  # kept, so that the markers stay in line
        kernels.append((fields[header["Kernel Name"]], seconds))
    if header is None:
        raise ValueError("no CSV header in ncu's output")
    return kernels


def split_calls(kernels: list[tuple[str, float]]) -> list[list[list[tuple[str, float]]]]:
    """Cases (each opened by a case marker) of calls (each opened by a call marker) of kernels."""
    cases: list[list[list[tuple[str, float]]]] = []
    for name, seconds in kernels:
        if CASE_MARKER in name:
            cases.append([])
        elif CALL_MARKER in name and cases:
            cases[-1].append([])
        elif cases and cases[-1]:
            cases[-1][-1].append((name, seconds))
    return cases


def run_ncu(names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    exe = shutil.which("ncu")
    if exe is None:
        return {"error": "ncu is not on PATH", "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        log, plan_path = Path(tmp, "ncu.csv"), Path(tmp, "plan.json")
        command = [exe, *NCU_FLAGS, "--log-file", str(log), sys.executable, SCRIPT, "--ncu-worker",
                   "--calls", str(args.calls), "--cases", ",".join(names), "--out", str(plan_path)] + \
            (["--quick"] if args.quick else [])
        result: dict[str, Any] = {"command": command, "error": None, "cases": {}}
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=args.ncu_timeout)
            result["rc"] = proc.returncode
            if proc.returncode != 0:
                result["error"] = f"ncu exited with {proc.returncode}: {(proc.stdout + proc.stderr)[-1500:]}"
            plan = json.loads(plan_path.read_text())
            groups = split_calls(parse_ncu_csv(log.read_text()))
        except Exception as exc:  # noqa: BLE001 (a timeout, no counters permission, no plan: recorded, not fatal)
            tail = log.read_text()[-1500:] if log.exists() else ""
            result["error"] = f"{result['error'] or ''} {type(exc).__name__}: {exc} {tail}".strip()
            return result
    result["worker_errors"] = plan["errors"]
    if len(groups) != len(plan["cases"]):
        result["error"] = f"ncu showed {len(groups)} cases, the worker ran {len(plan['cases'])}"
        return result
    for name, calls in zip(plan["cases"], groups):
        per_call = [sum(s for _, s in call) for call in calls]
        entry: dict[str, Any] = {"median_s": statistics.median(per_call) if per_call else None, "calls_s": per_call,
                                 "kernels": sorted({k for call in calls for k, _ in call}),
                                 "kernels_per_call": sorted({len(call) for call in calls})}
        if len(calls) != plan["calls"] or not all(calls) or any(math.isnan(s) for s in per_call):
            entry["error"] = f"{len(calls)} calls of {plan['calls']}, kernels per call {entry['kernels_per_call']}"
        result["cases"][name] = entry
    return result


# ---- the parent ----

def run_workers(names: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    runs = []
    for i in range(args.processes):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "run.json")
            command = [sys.executable, SCRIPT, "--repro-worker", "--index", str(i), "--out", str(out),
                       "--cases", ",".join(names), "--device", args.device, "--max-seconds", str(args.max_seconds)]
            if args.min_wall_seconds is not None:
                command += ["--min-wall-seconds", str(args.min_wall_seconds)]
            began = time.perf_counter()
            try:
                proc = subprocess.run(command + (["--quick"] if args.quick else []), capture_output=True, text=True,
                                      timeout=args.worker_timeout)
                failed = None if proc.returncode == 0 and out.exists() else (proc.stdout + proc.stderr)[-3000:]
            except subprocess.TimeoutExpired:
                failed = f"timed out after {args.worker_timeout} s"
            run = {"index": i, "error": failed, "cases": {}} if failed else json.loads(out.read_text())
        run["wall_s"] = time.perf_counter() - began
        print(f"process {i + 1}/{args.processes}: {run['wall_s']:.0f} s{'  FAILED' if 'error' in run else ''}",
              file=sys.stderr, flush=True)
        runs.append(run)
    return runs


def summarize(names: list[str], runs: list[dict[str, Any]], ncu: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per case and method: the first process's figure, its error vs ncu, the spread over processes."""
    summary = {}
    for name in names:
        truth = ncu.get("cases", {}).get(name, {})
        ncu_s = truth.get("median_s") if "error" not in truth else None
        row: dict[str, Any] = {"ncu_s": ncu_s}
        for method in METHODS:
            done = [r["cases"][name][method] for r in runs if "figure_s" in r["cases"].get(name, {}).get(method, {})]
            figures = [d["figure_s"] for d in done]
            fig = figures[0] if figures else None
            row[method] = {
                "figure_s": fig, "figures_s": figures,
                "error": (fig - ncu_s) / ncu_s if fig is not None and ncu_s else None,
                "spread": (max(figures) - min(figures)) / statistics.median(figures) if len(figures) > 1 else None,
                "wall_s": _median([d["wall_s"] for d in done]),
                "rse": _median([d["rse"] for d in done if d.get("rse") is not None]),
                "n": round(statistics.median(d["n"] for d in done)) if done and "n" in done[0] else None,
                "stopped_by": sorted({d["stopped_by"] for d in done if "stopped_by" in d}),
            }
        ref = ncu_s or row["ours"]["figure_s"]
        row["long"] = ref is not None and ref >= LONG
        row["target"] = 0.03 if row["long"] else 0.10
        err = row["ours"]["error"]
        row["pass"] = None if err is None else abs(err) <= row["target"]
        spread = row["ours"]["spread"]
        row["spread_pass"] = None if spread is None or not row["long"] else spread <= 0.01
        summary[name] = row
    return summary


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    v = seconds * 1e6
    return f"{v:,.0f} µs" if v >= 100 else f"{v:.1f} µs" if v >= 10 else f"{v:.2f} µs"


def _pct(x: float | None, signed: bool = True) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%" if signed else f"{100 * x:.2f}%"


def _verdict(ok: bool | None) -> str:
    return "—" if ok is None else "pass" if ok else "**miss**"


def _table(*columns: str) -> list[str]:
    """A Markdown table's header: the first column left-aligned, the others right-aligned."""
    return ["", "| " + " | ".join(columns) + " |", "|---|" + "---:|" * (len(columns) - 1)]


def markdown(meta: dict[str, Any], summary: dict[str, dict[str, Any]]) -> str:
    e = meta["env"]
    ncu = f"{meta['calls']} calls per case, `--clock-control none --cache-control all`" if meta["ncu_cases"] \
        else f"not run ({(meta['ncu_error'] or '')[:120]})"
    lines = [f"{meta['date'][:10]} · {e.get('device')} (driver {e.get('driver')}) · torch {e.get('torch')} · "
             f"Triton {e.get('triton')} · CUDA {e.get('cuda')} · {meta['processes']} processes · ncu {ncu} · "
             f"rooftop policy: {meta['policy_note']}"]
    lines += _table("case", "ncu", "rooftop", "error", "target", "")
    for name, r in summary.items():
        lines.append(f"| {name} | {_us(r['ncu_s'])} | {_us(r['ours']['figure_s'])} | {_pct(r['ours']['error'])} | "
                     f"±{100 * r['target']:.0f}% | {_verdict(r['pass'])} |")
    lines += _table("case", "ncu", "rooftop spread", "KernelBench-style spread", "do_bench spread",
                    "rooftop ≤ 1% (≥ 50 µs)")
    for name, r in summary.items():
        lines.append(f"| {name} | {_us(r['ncu_s'])} | " + " | ".join(_pct(r[m]["spread"], False) for m in METHODS)
                     + f" | {_verdict(r['spread_pass'])} |")
    lines += _table("case", "ncu", "rooftop (error)", "spread", "KernelBench-style (error)", "spread",
                    "do_bench (error)", "spread")
    for name, r in summary.items():
        cells = [(f"{_us(r[m]['figure_s'])} ({_pct(r[m]['error'])})" if r[m]["figure_s"] else "—")
                 + f" | {_pct(r[m]['spread'], False)}" for m in METHODS]
        lines.append(f"| {name} | {_us(r['ncu_s'])} | " + " | ".join(cells) + " |")
    lines += _table("case", "rooftop wall", "rooftop samples", "rooftop RSE", "fixed-100 wall", "fixed-100 RSE",
                    "do_bench wall")
    for name, r in summary.items():
        o, k, d = r["ours"], r["kernelbench"], r["do_bench"]
        lines.append(f"| {name} | {_s(o['wall_s'])} | {o['n'] or '—'} ({'/'.join(o['stopped_by']) or '—'}) | "
                     f"{_pct(o['rse'], False)} | {_s(k['wall_s'])} | {_pct(k['rse'], False)} | {_s(d['wall_s'])} |")
    totals = [_s(sum(w) if (w := [r[m]["wall_s"] for r in summary.values() if r[m]["wall_s"]]) else None)
              for m in METHODS]
    lines.append(f"| **total** | **{totals[0]}** | | | **{totals[1]}** | | **{totals[2]}** |")
    return "\n".join(lines) + "\n"


def _s(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.2f} s"


def self_check() -> None:
    head = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",' \
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
    rows = [(CASE_MARKER, "1,024"), (CALL_MARKER, "992"), ("void at::native::add_kernel<128, 4>(int, T3)", "4,608"),
            (CALL_MARKER, "1,000"), ("sm90_xmma_gemm_f16f16", "12,345,678"), ("splitKreduce_kernel", "2,000.5"),
            (CASE_MARKER, "1,000"), (CALL_MARKER, "1,000"), ("cunn_SoftMaxForward", "1.5")]
    text = "==PROF== Connected to process 77 (/usr/bin/python3)\n" + head + "\n" + "\n".join(
        f'"{i}","77","python3","host","{k}","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics",'
        f'"gpu__time_duration.sum","{"usecond" if k.startswith("cunn") else "nsecond"}","{v}"'
        for i, (k, v) in enumerate(rows))
    sums = [[round(sum(s for _, s in call) * 1e9, 1) for call in case] for case in split_calls(parse_ncu_csv(text))]
    assert sums == [[4608.0, 12347678.5], [1500.0]], sums
    print("ncu CSV parser: ok")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the CPU smoke path)")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--skip-ncu", action="store_true")
    parser.add_argument("--processes", type=int, help="fresh processes for reproducibility (default 5, 2 with --quick)")
    parser.add_argument("--calls", type=int, default=20, help="profiled calls per case under ncu")
    parser.add_argument("--max-seconds", type=float, default=5.0, help="cap on rooftop's measured time per case")
    parser.add_argument("--min-wall-seconds", type=float, help="the stopping rule's wall-time minimum (default: the "
                        "policy's; a huge value gives the measured-time minimum alone, the rule before it)")
    parser.add_argument("--ncu-timeout", type=int, default=300)
    parser.add_argument("--worker-timeout", type=int, default=300)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--self-check", action="store_true", help="check the ncu CSV parser on a sample and exit")
    parser.add_argument("--ncu-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repro-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.self_check:
        return self_check()
    if args.ncu_worker:
        return ncu_worker(args)
    if args.repro_worker:
        return repro_worker(args)
    began = time.perf_counter()
    known = list(build_cases(torch.device("cpu"), quick=True))  # names only; makes no tensors
    names = args.cases.split(",") if args.cases else known
    if unknown := [n for n in names if n not in known]:
        parser.error(f"unknown cases {unknown}; known: {','.join(known)}")
    args.processes = args.processes or (2 if args.quick else 5)
    runs = run_workers(names, args)
    skip = args.skip_ncu or args.device == "cpu"
    ncu = {"error": "skipped", "cases": {}} if skip else run_ncu(names, args)
    if not skip:
        note = f"  {ncu['error'][:300]}" if ncu["error"] else ""
        print(f"ncu: done {time.perf_counter() - began:.0f} s after the start{note}", file=sys.stderr, flush=True)
    policy = make_policy(args.device, args.max_seconds, args.min_wall_seconds)
    meta = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "env": next((r["env"] for r in runs if "env" in r), {}), "processes": args.processes, "calls": args.calls,
            "ncu_flags": NCU_FLAGS, "ncu_error": ncu.get("error"), "ncu_cases": len(ncu.get("cases", {})),
            "policy": policy.model_dump(), "policy_note": policy_note(policy, args.device), "argv": sys.argv}
    summary = summarize(names, runs, ncu)
    text = markdown(meta, summary)
    meta["wall_s"] = time.perf_counter() - began
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "summary": summary, "ncu": ncu, "runs": runs}))  # ~1.5 MB
    if args.markdown:
        args.markdown.write_text(text)
    print(text + f"\nwall {meta['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
