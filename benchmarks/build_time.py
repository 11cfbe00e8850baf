"""How long a load_inline build takes: cold (a fresh build folder) and a cache hit, with torch's
defaults and with rooftop's settings (build/jit.py: the present GPU's architecture only, ninja's
jobs from the usable cores), for a small elementwise CUDA extension.

    python benchmarks/build_time.py --out build_time.json [--sources kernelbench,prelude] [--repeats N]
                                    [--phases] [--host-pch]

Two sources: `kernelbench` is the KernelBench template (cuda_sources that `#include
<torch/extension.h>`, a declaration in cpp_sources, `functions=[...]`); `prelude` is the same
kernel with only the headers load_inline adds itself (torch/types.h, cuda.h, cuda_runtime.h).
Every build runs in a fresh interpreter, as the evaluation child does; its time is that of the
load_inline call (torch already imported), and ninja's own log gives each step (main.o: the host
compile of the binding, cuda.cuda.o: nvcc, the .so: the link). A cache hit is a second fresh
interpreter on the same folder. `--phases` runs nvcc once more with `--time` on the CUDA file of
the last cold build (where nvcc's time goes: preprocessing, cudafe++, cicc, ptxas, the host
compile), `--host-pch` times the host compile of main.cpp with torch's flags without and with a
precompiled torch/extension.h offered through an include folder placed first (this one works
on a machine without a GPU too). Needs torch with CUDA and a GPU for the load_inline rows; no
rooftop dependency beyond torch (the GPU images have no pydantic).

H100 host (16 cores, Intel Xeon, torch 2.11.0+cu130, nvcc 13.0, g++ from /opt/gcc), one run, seconds
(cold and hit: the load_inline call; a fresh interpreter adds about 4.5 s of torch import):

    source       settings   cold    hit  main.o  cuda.cuda.o  link
    kernelbench  torch      49.1   0.04    14.3         48.7  0.40
    kernelbench  rooftop    49.2   0.02    15.5         48.8  0.34
    prelude      torch      24.3   0.04    14.3         23.7  0.48
    prelude      rooftop    30.1   0.02    17.9         29.7  0.38
    nvcc phases (prelude): preprocessing 3.2, cudafe++ 7.8, cicc 8.5, ptxas 0.02, host compile 7.3
    host compile of main.cpp: 17.6; with the PCH 6.2 (building the PCH: 32.0 s, 684 MiB)

An earlier run on such a host: the kernelbench source's nvcc phases were preprocessing 4.6, cudafe++
17.8, cicc 16.9, host compile 20.0; with one ninja job (MAX_JOBS=1, or the process on one core)
the cold build took 75-77 s against 53-59 s. On a 2-core CPU VM (no GPU): main.cpp 12.6 s, with
the PCH 4.8 s (building it 25.8 s, 749 MiB).

So ninja already runs the two compiles side by side, one architecture instead of torch's default
(the GPU's, plus PTX) changes little, and a cold build is nvcc's one serial pipeline: cudafe++,
cicc and the host compiler each parse all of torch's headers (torch/types.h, which load_inline
adds itself, costs about 24 s; torch/extension.h in the CUDA source about 49 s). A PCH halves the
host compile of main.cpp, which runs beside nvcc and so never decides a CUDA extension's time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

KERNEL = r"""
__global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::zeros_like(a);
    int n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
SOURCES = {
    "kernelbench": "#include <torch/extension.h>\n#include <cuda_runtime.h>\n" + KERNEL,
    "prelude": KERNEL,
}
CPP = "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);"
NAME = "elementwise_add"
# what rooftop's child sets for a build (build/jit.py), cleared for torch's defaults
JIT_VARIABLES = ("TORCH_CUDA_ARCH_LIST", "MAX_JOBS")


def build_once(source: str, folder: str) -> dict:
    """In this (fresh) interpreter: load_inline into `folder`, call it once, read ninja's log."""
    import torch
    from torch.utils.cpp_extension import load_inline

    os.environ["TORCH_EXTENSIONS_DIR"] = folder
    started = time.perf_counter()
    module = load_inline(name=NAME, cpp_sources=CPP, cuda_sources=SOURCES[source], functions=["elementwise_add_cuda"])
    seconds = time.perf_counter() - started
    a = torch.ones(1 << 20, device="cuda")
    assert float(module.elementwise_add_cuda(a, a).sum()) == 2.0 * a.numel()
    return {"seconds": seconds, "steps": ninja_steps(Path(folder) / NAME)}


def ninja_steps(build: Path) -> dict[str, float]:
    """Seconds per output from ninja's log (its last run of each)."""
    log = build / ".ninja_log"
    steps: dict[str, float] = {}
    if log.exists():
        for line in log.read_text().splitlines()[1:]:
            start, end, _, output, _ = line.split("\t")
            steps[output] = (int(end) - int(start)) / 1000
    return steps


def run_build(source: str, folder: Path, env: dict[str, str]) -> dict:
    """One build in a fresh interpreter; its seconds, ninja's steps and the whole process's wall time."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", source, str(folder)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"build failed ({source}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - started
    return result


def settings_env(kind: str, folder: Path) -> dict[str, str]:
    """torch: none of the variables rooftop sets; rooftop: what its child sets (build/jit.py);
    serial: torch's defaults on one job, what a child pinned to one core would get."""
    if kind == "rooftop":
        import torch

        from rooftop.build.jit import jit_env

        return {**os.environ, **jit_env(folder, torch.cuda.get_device_capability())}
    env = {k: v for k, v in os.environ.items() if k not in JIT_VARIABLES}
    if kind == "serial":
        env["MAX_JOBS"] = "1"
    elif kind != "torch":
        raise SystemExit(f"--settings: unknown {kind!r}; expected torch, rooftop or serial")
    return env


def load_inline_rows(sources: list[str], kinds: list[str], repeats: int, work: Path) -> list[dict]:
    rows = []
    for repeat in range(repeats):
        for source in sources:
            for kind in kinds:
                folder = work / f"{source}-{kind}-{repeat}"
                env = settings_env(kind, folder)
                cold = run_build(source, folder / "torch_extensions", env)
                hit = run_build(source, folder / "torch_extensions", env)
                rows.append({"source": source, "settings": kind, "repeat": repeat, "cold_s": cold["seconds"],
                             "cold_process_s": cold["process_seconds"], "hit_s": hit["seconds"],
                             "hit_process_s": hit["process_seconds"], "steps": cold["steps"],
                             "build_dir": str(folder / "torch_extensions" / NAME)})
                print_row(rows[-1])
    return rows


def print_row(row: dict) -> None:
    steps = row["steps"]
    link = next((v for k, v in steps.items() if k.endswith(".so")), float("nan"))
    print(f"{row['source']:12s} {row['settings']:14s} {row['cold_s']:7.1f} {row['hit_s']:7.2f} "
          f"{steps.get('main.o', float('nan')):9.1f} {steps.get('cuda.cuda.o', float('nan')):13.1f} {link:7.2f}",
          flush=True)


def nvcc_phases(build: Path) -> dict[str, float]:
    """nvcc's own per-phase times (--time) for the CUDA file of a finished build, with its flags."""
    ninja = dict(re.findall(r"^(\w+) =(.*)$", (build / "build.ninja").read_text(), re.MULTILINE))
    report = build / "nvcc_time.csv"
    command = [*shlex.split(ninja["nvcc"]), *shlex.split(ninja["cuda_cflags"]), "--time", str(report),
               "-c", "cuda.cu", "-o", "phases.o"]
    subprocess.run(command, cwd=build, check=True, capture_output=True)
    phases: dict[str, float] = {}
    for line in report.read_text().splitlines()[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 7 and cells[1]:
            phases[cells[1]] = phases.get(cells[1], 0.0) + float(cells[6]) / 1000
    return phases


def host_pch(work: Path) -> dict:
    """main.cpp with torch's flags: without, then with a PCH of torch/extension.h in a folder placed
    first on the include path (gcc takes X.h.gch in a folder before X.h)."""
    import torch

    from rooftop.build.inline import compile_commands
    from rooftop.build.toolchain import nvcc_path

    class Call:  # the template's call, as rooftop's static scan reads it
        name, cpp, cuda, functions = NAME, [CPP], [SOURCES["kernelbench"]], ["elementwise_add_cuda"]
        extra_cflags: list[str] = []
        extra_cuda_cflags: list[str] = []
        extra_ldflags: list[str] = []
        extra_include_paths: list[str] = []
        with_pytorch_error_handling, no_implicit_headers = True, False

    if nvcc_path() is None:
        Call.cuda = []
    capability = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    folder = work / "host-pch"
    main = compile_commands(Call(), 0, folder, capability, nvcc_path() or "nvcc")[0].command  # type: ignore[arg-type]
    header = Path(torch.__file__).parent / "include" / "torch" / "extension.h"
    pch_dir = work / "pch"
    (pch_dir / "torch").mkdir(parents=True, exist_ok=True)
    gch = pch_dir / "torch" / "extension.h.gch"
    compiler, flags = main[:1], [f for f in main[1:main.index("-c")] if not f.startswith("-DTORCH_EXTENSION_NAME")]

    def timed(command: list[str]) -> tuple[float, str]:
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=folder, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"host compile failed: {shlex.join(command)}\n{proc.stderr[-3000:]}")
        return time.perf_counter() - started, proc.stderr

    plain, _ = timed(main)
    build, _ = timed([*compiler, *flags, "-x", "c++-header", str(header), "-o", str(gch)])
    with_pch, trace = timed([*main[:1], f"-I{pch_dir}", "-Winvalid-pch", "-H", *main[1:]])
    used = any(line.startswith("! ") and line.endswith(".gch") for line in trace.splitlines())
    result = {"main_plain_s": plain, "pch_build_s": build, "main_with_pch_s": with_pch, "pch_used": used,
              "pch_bytes": gch.stat().st_size, "command": shlex.join(main)}
    print(f"host compile of main.cpp: {plain:.1f} s; with the PCH {with_pch:.1f} s (used: {used}); "
          f"the PCH took {build:.1f} s and {gch.stat().st_size / 2**20:.0f} MiB", flush=True)
    return result


def platform() -> dict:
    import torch

    from rooftop.build.jit import usable_cores
    from rooftop.build.toolchain import nvcc_version

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"torch": torch.__version__, "nvcc": nvcc_version(), "gpu": gpu, "cores": usable_cores(),
            "cxx": os.environ.get("CXX", "c++"), "ninja": shutil.which("ninja")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    parser.add_argument("--sources", default="kernelbench,prelude", help="kernelbench, prelude (comma-separated)")
    parser.add_argument("--settings", default="torch,rooftop", help="torch, rooftop, serial (MAX_JOBS=1)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--phases", action="store_true", help="nvcc's per-phase times for the last cold build")
    parser.add_argument("--host-pch", action="store_true", help="main.cpp without and with a precompiled header")
    parser.add_argument("--child", nargs=2, metavar=("SOURCE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(build_once(*args.child)))
        return
    import torch

    sources = [s for s in args.sources.split(",") if s]
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown:
        parser.error(f"--sources: unknown {unknown}; expected some of {sorted(SOURCES)}")
    report: dict = {"platform": platform(), "rows": []}
    print(json.dumps(report["platform"]))
    work = Path(tempfile.mkdtemp(prefix="rooftop-build-time-"))
    if torch.cuda.is_available():
        print(f"{'source':12s} {'settings':14s} {'cold s':>7s} {'hit s':>7s} {'main.o s':>9s} {'cuda.cuda.o s':>13s} "
              f"{'link s':>7s}")
        report["rows"] = load_inline_rows(sources, args.settings.split(","), args.repeats, work)
        if args.phases and report["rows"]:
            report["nvcc_phases"] = nvcc_phases(Path(report["rows"][-1]["build_dir"]))
            print("nvcc phases (s):", ", ".join(f"{k} {v:.2f}" for k, v in report["nvcc_phases"].items()))
    else:
        print("no GPU here: the load_inline rows need torch with CUDA and a GPU")
    if args.host_pch:
        report["host_pch"] = host_pch(work)
    shutil.rmtree(work, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
