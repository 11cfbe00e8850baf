"""Standalone .cu files, built by nvcc into shared libraries that the solution loads with ctypes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from rooftop.build.backends import BACKENDS, Backend, BuildRequest, Checked, SourceScan
from rooftop.build.toolchain import BuildResult, arch_flag, nvcc_path, trim_compiler_log
from rooftop.verdict import GateFailed, Status


def build_standalone(cu_files: list[Path], out_dir: Path, capability: tuple[int, int] | None,
                     timeout: float) -> BuildResult:
    """nvcc each `name.cu` into `out_dir/name.so`; skipped when the folder already holds it."""
    started = time.monotonic()
    targets = [out_dir / f"{f.stem}.so" for f in cu_files]
    if all(t.exists() for t in targets):
        return BuildResult(ok=True, cached=True)
    nvcc = nvcc_path()
    if nvcc is None:
        return BuildResult(ok=False, log="nvcc was not found (needed for standalone .cu files)")
    logs = []
    for src, target in zip(cu_files, targets):
        tmp = target.with_suffix(".so.tmp")
        cmd = [nvcc, "-O3", "-std=c++17", arch_flag(capability), "-shared", "-Xcompiler", "-fPIC",
               "-I", str(src.parent), str(src), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=src.parent)
        logs.append(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            return BuildResult(ok=False, seconds=time.monotonic() - started, log="\n".join(logs))
        tmp.rename(target)  # atomic: a half-written .so is never mistaken for a cached build
    return BuildResult(ok=True, seconds=time.monotonic() - started, log="\n".join(logs))


class CudaNvcc(Backend):
    """Built before the import wherever nvcc is (a machine without a GPU builds them as its check)."""

    name, rank, family = "cuda_nvcc", 4, "cuda"
    compiled, needs_gpu = True, True
    kernel_markers = frozenset({"ctypes.CDLL", "ctypes.cdll.LoadLibrary", "ctypes.PyDLL"})
    source_suffixes = frozenset({".cu", ".cuh", ".cpp", ".cc", ".c", ".h", ".hpp"})

    def recognise(self, scan: SourceScan) -> bool:
        return any(f.suffix == ".cu" for f in scan.files)

    def build(self, request: BuildRequest) -> bool | None:
        cu_files = [f for f in request.files if f.suffix == ".cu"]
        if not cu_files or (request.device != "cuda" and nvcc_path() is None):
            return None
        result = build_standalone(cu_files, request.folder, request.capability, request.timeout)
        if not result.ok:
            raise GateFailed(Status.compile_error, "nvcc failed:\n" + trim_compiler_log(result.log))
        return result.cached

    def check_without_gpu(self, request: BuildRequest) -> Checked:
        """`build` compiled them already."""
        return Checked(notes=["its .cu files compile with nvcc"])


BACKENDS.add(CudaNvcc.name, CudaNvcc())
