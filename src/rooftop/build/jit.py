"""The settings torch's JIT extension builder (load_inline, load) runs with in the evaluation child.

The child imports the solution, and a `load_inline` call builds there with ninja: main.cpp (the
C++ sources and their pybind11 binding) with the host compiler, and cuda.cu with nvcc, in
parallel. What rooftop sets: the build folder (one per source and platform, so a second
evaluation of the same source finds the library and builds nothing), the architecture of the
GPU present, and ninja's job count from the cores this process may use (not from an affinity or
thread setting meant for timing). On an H100 host a cold build is bound by nvcc's one serial
pipeline over torch's headers: about 24 s for the headers load_inline adds, 49 s when the CUDA
source includes torch/extension.h as KernelBench's template does (benchmarks/build_time.py); a
cache hit takes milliseconds. These settings keep everything else off that path.
"""

from __future__ import annotations

import os
from pathlib import Path

from rooftop import config


def cuda_arch_list(capability: tuple[int, int] | None) -> str:
    """TORCH_CUDA_ARCH_LIST for one GPU: its own architecture only, with the 'a' suffix on Hopper and
    later (wgmma/TMA code builds), and no PTX; Hopper when no GPU is present."""
    major, minor = capability or (9, 0)
    return f"{major}.{minor}{'a' if major >= 9 else ''}"


def usable_cores() -> int:
    """Cores this process may run on (its affinity), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def jit_env(folder: Path, capability: tuple[int, int] | None) -> dict[str, str]:
    """Variables for builds into `folder` for a GPU of `capability` (None: no GPU, no CUDA builds).

    MAX_JOBS is left alone when the user set it; else ninja gets one job per usable core (ninja's
    own default depends on its version and may count cores the process cannot use). A user's
    TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES stands too."""
    env = {config.BUILD_DIR: str(folder),
           "TORCH_EXTENSIONS_DIR": str(folder / "torch_extensions"),
           "TRITON_CACHE_DIR": str(folder / "triton")}
    if capability is not None:
        env["TORCH_CUDA_ARCH_LIST"] = cuda_arch_list(capability)
    if not os.environ.get("MAX_JOBS", "").isdigit():
        env["MAX_JOBS"] = str(usable_cores())
    # no nvcc dependency file: it lists every header the toolkit and torch bring (about 5,400), which
    # the folder's key already stands for (one folder per source, torch, CUDA and nvcc). With that
    # list, ninja in a GPU host's evaluation child once rebuilt cuda.cuda.o (not main.o, whose gcc
    # list names no system header) that the build pool had just built into the same folder: 27-32 s
    # of the GPU worker's time per inline-CUDA candidate
    if "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES" not in os.environ:
        env["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] = "1"
    return env
