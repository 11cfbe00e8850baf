"""Where a verdict came from: device, mode and software versions."""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from typing import TypedDict

from rooftop.solution.loader import Language, Solution
from rooftop.verdict import Environment


def rooftop_version() -> str:
    try:
        return metadata.version("rooftop")
    except metadata.PackageNotFoundError:
        return "unknown"


def triton_version() -> str | None:
    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


def mode_for(device: str, solution: Solution) -> str:
    if device == "cuda":
        return "gpu"
    if solution.needs_cuda:
        return "cpu (compile check only)"
    if Language.triton in solution.languages:
        return "cpu+triton-interpreter"
    return "cpu"


class EnvironmentBasics(TypedDict):
    """The fields a verdict's `Environment` shares with a baseline's `Platform`."""

    device: str
    device_name: str
    torch: str
    triton: str | None
    cuda: str | None


def collect_environment_basics(device: str) -> EnvironmentBasics:
    """The facts a time depends on: device, its name, and the torch, Triton and CUDA versions."""
    import torch

    name = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine()
    return {"device": device, "device_name": name, "torch": torch.__version__, "triton": triton_version(),
            "cuda": torch.version.cuda}


def collect_environment(device: str, solution: Solution | None = None) -> Environment:
    """The machine and software a verdict was made on (`solution` decides the mode; None: a device
    described before any solution, by the worker that will run them)."""
    from rooftop.build.toolchain import nvcc_version
    from rooftop.score.hardware import lookup

    basics = collect_environment_basics(device)
    mode = mode_for(device, solution) if solution else ("gpu" if device == "cuda" else "cpu")
    gpu = lookup(str(basics["device_name"])) if device == "cuda" else None
    driver = driver_version() if device == "cuda" else None
    return Environment(
        **basics, mode=mode, gpu_key=gpu.key if gpu else None,
        python=platform.python_version(), nvcc=nvcc_version(), driver=driver,
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        hostname=socket.gethostname(), rooftop=rooftop_version(),
    )


def parent_environment(device: str, solution: Solution, ran: bool) -> Environment:
    """Where no child reported its environment: what this (trusted) process sees of the same
    machine. `ran` says whether a child was started at all (a static failure starts none)."""
    environment = collect_environment(device, solution)
    if not ran:
        environment.mode = "not run (refused before any process started)"
    return environment



def driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            first = f.readline()
    except OSError:
        return None
    words = [w for w in first.split() if w.count(".") >= 1 and w.replace(".", "").isdigit()]
    return words[0] if words else None


def process_age() -> float:
    """Seconds since this process was created: its interpreter's start and its imports so far."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            return max(0.0, float(uptime.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
