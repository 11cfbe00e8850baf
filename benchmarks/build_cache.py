"""Build times through rooftop's own build path: a load_inline extension built cold, then found in
the build cache by a later evaluation of the same source, and by a process other than the one
that built it (`rooftop batch`'s build worker builds, its device worker and then a separate
`rooftop eval` reuse the build).

Two extensions. `small` is the examples deck's row-sum solution (one kernel, only the headers
load_inline adds itself). `large` is a softmax written as a KernelBench candidate usually is:
`#include <torch/extension.h>` in the CUDA source (which doubles nvcc's time, benchmarks/
build_time.py), three kernel templates instantiated for four block sizes and two dtypes through
AT_DISPATCH_FLOATING_TYPES (and host lambdas per block size), four bound functions. (It takes the
caller's stream from Python, as the examples do, rather than from c10's CUDA headers, which a
CPU-only torch lacks: so the CPU run compile-checks it too.) Each source
carries a comment naming this run, inside its CUDA string, so no cache outside the run can serve it.

For each extension, with an empty ROOFTOP_CACHE:
  cold   `rooftop eval` of the source (the build gate compiles it);
  warm   `rooftop eval` of the same source again, same cache: the build gate must report `cached`,
         take well under a second, and leave every object and library of the build untouched
         (their modification times are compared), i.e. no compiler ran.
Then, with a second empty ROOFTOP_CACHE:
  batch  `rooftop batch` of the same source: its build worker compiles (with no GPU in sight) and its
         device worker evaluates, finding the build;
  eval   a separate `rooftop eval` on that cache: a hit, the objects untouched.
The build seconds are the build gate's (the child's compile and import of the solution, not its
start); the evaluations use the `tiny` shape without timing, since only the build is measured.

On a machine without a GPU, `--device cpu` runs the same steps: CUDA sources are compile-checked
with nvcc (`needs_gpu`), and the check is cached the same way. `--dry` writes the sources, prints
the commands it would run and an empty report, and runs nothing.

    python benchmarks/build_cache.py [--device cuda|cpu] [--extensions small,large] [--dry] [--keep] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INLINE_ANCHOR = 'CUDA_SOURCE = r"""\n'
HIT_SECONDS = 1.0  # a cache hit's build gate must take less than this
EVAL_OPTIONS = ["--shapes", "tiny", "--no-timing"]

LARGE_SOLUTION = '''"""Row softmax as a KernelBench candidate writes it: torch/extension.h in the CUDA source, kernel
templates per block size and dtype, several bound functions; the forward uses the one-pass kernel."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <type_traits>

namespace {

template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };

__device__ __forceinline__ float exp_of(float v) { return expf(v); }
__device__ __forceinline__ double exp_of(double v) { return exp(v); }
__device__ __forceinline__ float log_of(float v) { return logf(v); }
__device__ __forceinline__ double log_of(double v) { return log(v); }
__device__ __forceinline__ float max_of(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_of(double a, double b) { return fmax(a, b); }

template <typename A>
__device__ __forceinline__ A warp_max(A v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = max_of(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// A block-wide max or sum, returned to every thread; `scratch` holds one value per warp.
template <int kThreads, bool kMax, typename A>
__device__ A block_reduce(A v, A* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = kMax ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const A none = kMax ? static_cast<A>(-INFINITY) : static_cast<A>(0);
        v = lane < kThreads / 32 ? scratch[lane] : none;
        v = kMax ? warp_max(v) : warp_sum(v);
        if (lane == 0) scratch[0] = v;
    }
    __syncthreads();
    const A result = scratch[0];
    __syncthreads();  // the next reduction writes scratch again
    return result;
}

// One block per row: the row's max, the sum of exp(x - max), then y = exp(x - max) / sum.
template <int kThreads, typename T>
__global__ void __launch_bounds__(kThreads)
softmax_rows_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    using A = typename AccOf<T>::type;
    __shared__ A scratch[kThreads / 32];
    const T* xr = x + static_cast<int64_t>(blockIdx.x) * n;
    T* yr = y + static_cast<int64_t>(blockIdx.x) * n;
    A m = static_cast<A>(-INFINITY);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) m = max_of(m, static_cast<A>(xr[i]));
    m = block_reduce<kThreads, true>(m, scratch);
    A s = static_cast<A>(0);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) s += exp_of(static_cast<A>(xr[i]) - m);
    s = block_reduce<kThreads, false>(s, scratch);
    const A inv = static_cast<A>(1) / s;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) yr[i] = static_cast<T>(exp_of(static_cast<A>(xr[i]) - m) * inv);
}

// One block per row: the row's max and log-sum-exp.
template <int kThreads, typename T>
__global__ void __launch_bounds__(kThreads)
row_stats_kernel(const T* __restrict__ x, T* __restrict__ row_max, T* __restrict__ row_lse, int64_t n) {
    using A = typename AccOf<T>::type;
    __shared__ A scratch[kThreads / 32];
    const T* xr = x + static_cast<int64_t>(blockIdx.x) * n;
    A m = static_cast<A>(-INFINITY);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) m = max_of(m, static_cast<A>(xr[i]));
    m = block_reduce<kThreads, true>(m, scratch);
    A s = static_cast<A>(0);
    for (int64_t i = threadIdx.x; i < n; i += kThreads) s += exp_of(static_cast<A>(xr[i]) - m);
    s = block_reduce<kThreads, false>(s, scratch);
    if (threadIdx.x == 0) {
        row_max[blockIdx.x] = static_cast<T>(m);
        row_lse[blockIdx.x] = static_cast<T>(m + log_of(s));
    }
}

// Elementwise over the whole tensor: y = exp(x - lse of its row).
template <typename T>
__global__ void normalize_kernel(const T* __restrict__ x, const T* __restrict__ row_lse, T* __restrict__ y,
                                 int64_t total, int64_t n) {
    using A = typename AccOf<T>::type;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
        y[i] = static_cast<T>(exp_of(static_cast<A>(x[i]) - static_cast<A>(row_lse[i / n])));
    }
}

template <typename F>
void with_threads(int64_t n, F&& launch) {
    if (n <= 128) launch(std::integral_constant<int, 128>{});
    else if (n <= 256) launch(std::integral_constant<int, 256>{});
    else if (n <= 512) launch(std::integral_constant<int, 512>{});
    else launch(std::integral_constant<int, 1024>{});
}

void check_input(const torch::Tensor& x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    TORCH_CHECK(x.size(0) <= 2147483647LL, "too many rows");
}

void check_launch(const char* what) {
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, what, " launch failed: ", cudaGetErrorString(err));
}

void row_stats(const torch::Tensor& x, torch::Tensor& row_max, torch::Tensor& row_lse, cudaStream_t stream) {
    const int64_t rows = x.size(0), n = x.size(1);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "row_stats", [&] {
        with_threads(n, [&](auto threads) {
            constexpr int kThreads = decltype(threads)::value;
            row_stats_kernel<kThreads, scalar_t><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
                x.data_ptr<scalar_t>(), row_max.data_ptr<scalar_t>(), row_lse.data_ptr<scalar_t>(), n);
        });
    });
    check_launch("row_stats");
}

}  // namespace

// Each function runs on the caller's current stream, whose handle comes from Python.
torch::Tensor softmax_forward(torch::Tensor x, int64_t stream_handle) {
    check_input(x);
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), n = x.size(1);
    if (rows == 0 || n == 0) return y;
    const auto stream = reinterpret_cast<cudaStream_t>(stream_handle);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "softmax_forward", [&] {
        with_threads(n, [&](auto threads) {
            constexpr int kThreads = decltype(threads)::value;
            softmax_rows_kernel<kThreads, scalar_t><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
                x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
        });
    });
    check_launch("softmax_forward");
    return y;
}

torch::Tensor softmax_two_pass(torch::Tensor x, int64_t stream_handle) {
    check_input(x);
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), n = x.size(1);
    if (rows == 0 || n == 0) return y;
    const auto stream = reinterpret_cast<cudaStream_t>(stream_handle);
    auto row_max = torch::empty({rows}, x.options());
    auto row_lse = torch::empty({rows}, x.options());
    row_stats(x, row_max, row_lse, stream);
    const int64_t total = rows * n;
    const int64_t blocks = std::min<int64_t>((total + 255) / 256, 65536);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "softmax_two_pass", [&] {
        normalize_kernel<scalar_t><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
            x.data_ptr<scalar_t>(), row_lse.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), total, n);
    });
    check_launch("normalize");
    return y;
}

torch::Tensor row_logsumexp(torch::Tensor x, int64_t stream_handle) {
    check_input(x);
    x = x.contiguous();
    auto row_max = torch::empty({x.size(0)}, x.options());
    auto row_lse = torch::empty({x.size(0)}, x.options());
    if (x.size(0) == 0 || x.size(1) == 0) return row_lse.fill_(-INFINITY);
    row_stats(x, row_max, row_lse, reinterpret_cast<cudaStream_t>(stream_handle));
    return row_lse;
}

torch::Tensor row_max(torch::Tensor x, int64_t stream_handle) {
    check_input(x);
    x = x.contiguous();
    auto row_max = torch::empty({x.size(0)}, x.options());
    auto row_lse = torch::empty({x.size(0)}, x.options());
    if (x.size(0) == 0 || x.size(1) == 0) return row_max.fill_(-INFINITY);
    row_stats(x, row_max, row_lse, reinterpret_cast<cudaStream_t>(stream_handle));
    return row_max;
}
"""

CPP_SOURCE = """
torch::Tensor softmax_forward(torch::Tensor x, int64_t stream_handle);
torch::Tensor softmax_two_pass(torch::Tensor x, int64_t stream_handle);
torch::Tensor row_logsumexp(torch::Tensor x, int64_t stream_handle);
torch::Tensor row_max(torch::Tensor x, int64_t stream_handle);
"""

_ext = load_inline(
    name="rooftop_bench_softmax_large",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["softmax_forward", "softmax_two_pass", "row_logsumexp", "row_max"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_forward(x, torch.cuda.current_stream(x.device).cuda_stream)
'''

EXTENSIONS = {
    "small": ("examples/row_sum", "1 kernel, load_inline's own headers"),
    "large": ("examples/softmax", "3 kernel templates x 8, 4 functions, torch/extension.h"),
}


def solution_source(extension: str, tag: str) -> str:
    if extension == "small":
        text = (ROOT / "problems" / "examples" / "row_sum" / "solutions" / "cuda_row_sum.py").read_text()
    else:
        text = LARGE_SOLUTION
    if INLINE_ANCHOR not in text:
        raise SystemExit(f"{extension}: no CUDA string to mark ({INLINE_ANCHOR!r})")
    return text.replace(INLINE_ANCHOR, f"{INLINE_ANCHOR}// {tag}\n", 1)


def env_for(cache: Path) -> dict[str, str]:
    src = str(ROOT / "src")
    python_path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "ROOFTOP_CACHE": str(cache), "PYTHONPATH": python_path, "COLUMNS": "200"}


def rooftop(args: list[str], cache: Path, dry: bool) -> tuple[float, subprocess.CompletedProcess | None]:
    if dry:
        print(f"  ROOFTOP_CACHE={cache} {Path(sys.executable).name} -m rooftop {' '.join(args)}")
        return 0.0, None
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True,
                          env=env_for(cache), cwd=ROOT)
    return time.perf_counter() - started, proc


def build_record(verdict: dict) -> dict | None:
    return next((g for g in verdict.get("gates", []) if g["gate"] == "build"), None)


def objects(cache: Path) -> dict[str, int]:
    """Every object and library under the cache's build folders, with its modification time."""
    root = cache / "builds"
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")
            if p.suffix in (".o", ".so") and p.is_file()}


def untouched(before: dict[str, int], after: dict[str, int]) -> bool | None:
    """Whether no compiler wrote anything (None: there was nothing built to compare)."""
    return None if not before else before == after


def evaluation(problem: str, solution: Path, cache: Path, db: Path, device: str, dry: bool) -> dict:
    """One `rooftop eval`: its status and its build gate (seconds, cached)."""
    wall, proc = rooftop(["eval", problem, str(solution), "--device", device, *EVAL_OPTIONS, "--json",
                          "--db", str(db)], cache, dry)
    if proc is None:
        return {}
    try:
        verdict = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"rooftop eval gave no verdict (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    if "error" in verdict:
        raise SystemExit(f"rooftop eval: {verdict['error']}")
    record = build_record(verdict) or {}
    return {"status": verdict["status"], "build_s": record.get("seconds"), "cached": record.get("cached"),
            "gate_build_s": verdict.get("phases", {}).get("gate_build"), "process_s": wall,
            "messages": verdict.get("messages", [])[:2]}


def batch(problem: str, solution: Path, cache: Path, work: Path, device: str, dry: bool) -> dict:
    """`rooftop batch` of the one source: its build worker's compile, and what its device worker found."""
    lines = work / "batch.jsonl"
    lines.write_text(json.dumps({"problem": problem, "solution": str(solution)}) + "\n")
    db = work / "batch.db"
    wall, proc = rooftop(["batch", str(lines), "--device", device, *EVAL_OPTIONS, "--builders", "1", "--json",
                          "--db", str(db)], cache, dry)
    if proc is None:
        return {}
    if proc.returncode != 0:
        raise SystemExit(f"rooftop batch failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-2000:]}")
    job = json.loads(proc.stdout)[0]
    verdict = None
    if job["evaluation_id"] is not None:
        with sqlite3.connect(db) as con:
            row = con.execute("SELECT verdict_json FROM evaluations WHERE id = ?", (job["evaluation_id"],)).fetchone()
        verdict = json.loads(row[0]) if row else None
    record = (build_record(verdict) or {}) if verdict else {}
    out = {"status": job["status"], "process_s": wall, "builder_s": job["build_s"],
           "builder_cached": job["build_cached"], "device": job["device"]}
    if job["device"] is not None:  # the device worker evaluated it: its build gate
        out.update(device_build_s=record.get("seconds"), device_cached=record.get("cached"))
    else:  # settled by the build worker (a compile error, or needs_gpu on a CPU): its build gate is the verdict's
        out.update(builder_s=record.get("seconds"), builder_cached=record.get("cached"))
    return out


def hit(row: dict, cached_key: str = "cached", seconds_key: str = "build_s") -> str:
    if not row or row.get(cached_key) is None:
        return "-"
    if not row[cached_key]:
        return "no"
    return "yes" if (row.get(seconds_key) or 0.0) < HIT_SECONDS else f"cached, {row[seconds_key]:.2f} s"


def seconds(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def yes_no(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "NO"


def run_extension(extension: str, device: str, work: Path, run: str, dry: bool) -> dict:
    problem, what = EXTENSIONS[extension]
    folder = work / extension
    folder.mkdir(parents=True)
    solution = folder / f"{extension}_extension.py"
    solution.write_text(solution_source(extension, f"build_cache run {run} extension {extension}"))
    print(f"{extension}: {what} ({problem}, {len(solution.read_text().splitlines())} lines)", flush=True)
    cache = folder / "cache-eval"
    cold = evaluation(problem, solution, cache, folder / "eval.db", device, dry)
    built = objects(cache)
    warm = evaluation(problem, solution, cache, folder / "eval.db", device, dry)
    warm["objects_untouched"] = untouched(built, objects(cache))
    shared_cache = folder / "cache-batch"
    by_batch = batch(problem, solution, shared_cache, folder, device, dry)
    built = objects(shared_cache)
    after = evaluation(problem, solution, shared_cache, folder / "after-batch.db", device, dry)
    after["objects_untouched"] = untouched(built, objects(shared_cache))
    if not dry:
        print(f"  cold {cold['build_s']:.2f} s ({cold['status']}), warm {warm['build_s']:.2f} s "
              f"(cached {warm['cached']}); batch: build worker {seconds(by_batch.get('builder_s'))} s, "
              f"then eval {after['build_s']:.2f} s (cached {after['cached']})", flush=True)
    return {"extension": extension, "problem": problem, "what": what, "solution": str(solution), "cold": cold,
            "warm": warm, "batch": by_batch, "eval_after_batch": after}


def report(rows: list[dict], device: str) -> None:
    print(f"\nbuild gate seconds on {device} (a hit: `cached` and under {HIT_SECONDS:g} s; compiler skipped: every "
          "object and library of the build left as it was)")
    print(f"{'extension':10s} {'what':56s} {'cold build s':>12s} {'warm build s':>12s} {'hit':>5s} "
          f"{'compiler skipped':>17s}  status")
    for r in rows:
        cold, warm = r["cold"], r["warm"]
        print(f"{r['extension']:10s} {r['what']:56s} {seconds(cold.get('build_s')):>12s} "
              f"{seconds(warm.get('build_s')):>12s} {hit(warm):>5s} {yes_no(warm.get('objects_untouched')):>17s}  "
              f"{cold.get('status', '-')}")
    print("\nshared cache: built by `rooftop batch`'s build worker, then found by its device worker and by a "
          "separate `rooftop eval`")
    print(f"{'extension':10s} {'build worker s':>14s} {'device worker hit':>18s} {'eval s':>8s} {'eval hit':>9s} "
          f"{'compiler skipped':>17s}  status")
    for r in rows:
        b, after = r["batch"], r["eval_after_batch"]
        device_hit = hit(b, "device_cached", "device_build_s") if b.get("device") else "-"
        print(f"{r['extension']:10s} {seconds(b.get('builder_s')):>14s} {device_hit:>18s} "
              f"{seconds(after.get('build_s')):>8s} {hit(after):>9s} {yes_no(after.get('objects_untouched')):>17s}  "
              f"{b.get('status') or '-'}")
    if any(r["batch"] and not r["batch"].get("device") for r in rows):
        print("(device worker hit -: the build worker gave the verdict itself, as it does for needs_gpu on a CPU "
              "or a compile error; no device worker ran the job)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--extensions", default="small,large", help="small, large (comma-separated)")
    parser.add_argument("--dry", action="store_true", help="write the sources and print the commands; run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (sources, caches, databases)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    extensions = [e for e in args.extensions.split(",") if e]
    unknown = sorted(set(extensions) - set(EXTENSIONS))
    if unknown or not extensions:
        parser.error(f"--extensions: expected some of {sorted(EXTENSIONS)} (got {args.extensions!r})")
    work = Path(tempfile.mkdtemp(prefix="rooftop-build-cache-"))
    run = secrets.token_hex(4)
    try:
        rows = [run_extension(e, args.device, work, run, args.dry) for e in extensions]
        report(rows, args.device)
        if args.json:
            args.json.write_text(json.dumps({"device": args.device, "dry": args.dry, "hit_seconds": HIT_SECONDS,
                                             "rows": rows}, indent=2) + "\n")
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
