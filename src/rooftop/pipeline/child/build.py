"""The build gate as the child runs it: compile what needs compiling, then import the solution.

Runs only in the evaluation child: importing a solution runs its code.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from types import ModuleType

from rooftop.pipeline.job import EvalJob
from rooftop.problem.instance import import_file
from rooftop.verdict import Gate, GateFailed, Status, crash_status


def build(job: EvalJob, folder: Path) -> tuple[ModuleType, bool | None]:
    """The solution's module, and whether its compiled parts came from the cache (None: nothing compiled).
    Builds of one source take turns (build/cache.py exclusive_build): importing runs load_inline."""
    from rooftop.build.cache import exclusive_build

    with exclusive_build(folder):
        cached = _compile_native(job, folder)
        compiled_before = _libraries(folder)
        module = _import_solution(job)
        compiled_after = _libraries(folder)
    if not compiled_after:
        return module, None  # nothing was compiled: Python, or Triton (which compiles at first call)
    return module, cached and compiled_after == compiled_before


def _libraries(folder: Path) -> dict[Path, int]:
    """The shared libraries under `folder` with their modification times: an import that relinks
    one in place (load_inline's ninja finding an object out of date) did compile."""
    found = {}
    for path in folder.rglob("*.so"):
        try:
            found[path] = path.stat().st_mtime_ns
        except OSError:
            continue
    return found


def _compile_native(job: EvalJob, folder: Path) -> bool:
    """Each language backend builds what the import needs (nvcc for .cu files); on a machine without
    a GPU, each compile-checks what only a GPU would run, and then `needs_gpu`."""
    from rooftop.build.backends import BuildRequest, ordered
    from rooftop.build.toolchain import nvcc_path

    solution = job.solution
    request = BuildRequest(files=solution.files, inline=solution.inline, folder=folder,
                           capability=target_capability(job), device=job.device, timeout=job.build_timeout)
    backends = ordered(solution.languages)
    cached = all([backend.build(request) is not False for backend in backends])  # every one builds
    if job.device != "cpu" or not solution.needs_cuda:
        return cached
    messages = []
    if nvcc_path() is None:
        messages.append("nvcc is not installed here, so its CUDA code was not compile-checked")
    else:
        for backend in backends:
            checked = backend.check_without_gpu(request)
            messages += checked.notes
            cached = cached and checked.cached
    raise GateFailed(Status.needs_gpu, "this solution uses CUDA and this machine has no GPU: "
                     + "; ".join(messages) + "; run it on a GPU for a verdict", cached=cached)


def _import_solution(job: EvalJob) -> ModuleType:
    from rooftop.build.toolchain import trim_compiler_log

    try:
        return import_file(job.solution.entry, "rooftop_solution", keep_path=True)
    except SyntaxError as exc:
        raise GateFailed(Status.compile_error, f"{Path(exc.filename or '').name}:{exc.lineno}: syntax error: {exc.msg}")
    except Exception as exc:
        text = str(exc)
        if "Error building extension" in text or "ninja" in text.lower():
            raise GateFailed(Status.compile_error, "load_inline build failed:\n" + trim_compiler_log(text))
        raise GateFailed(status_for_exception(exc, Gate.build), "importing the solution failed: " + describe(exc, job))


def prepare_build_folder(job: EvalJob) -> Path:
    """The build folder for this source on this platform, and the variables that point builds at it
    (build/jit.py). The platform is what changes the binary: torch and its CUDA version, the
    device and its architecture, and the compiler (nvcc's binary, named by its size and time)."""
    import torch

    from rooftop.build.cache import build_dir
    from rooftop.build.jit import jit_env
    from rooftop.build.toolchain import nvcc_path

    key = f"torch{torch.__version__}-cu{torch.version.cuda or 'none'}-{job.device}"
    capability = target_capability(job)
    if capability is not None:
        major, minor = capability
        key += f"-sm{major}{minor}"
    key += "-nvcc" + compiler_identity(nvcc_path())
    folder = build_dir(job.solution.source_hash, key, job.cache_root)
    os.environ.update(jit_env(folder, capability))
    return folder


def compiler_identity(path: str | None) -> str:
    """A short name for one compiler binary, without running it (this is on every evaluation's path)."""
    if path is None:
        return "none"
    import hashlib

    try:
        stat = Path(path).resolve().stat()
    except OSError:
        return "none"
    return hashlib.sha256(f"{Path(path).resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:10]


def target_capability(job: EvalJob) -> tuple[int, int] | None:
    """The architecture to build for: the job's (the build stage sees no GPU), else the GPU's."""
    return job.capability if job.capability is not None else capability_of(job.device)


def capability_of(device: str) -> tuple[int, int] | None:
    if device != "cuda":
        return None
    import torch

    return torch.cuda.get_device_capability()


def status_for_exception(exc: BaseException, gate: Gate) -> Status:
    """A sandbox refusal is `rejected`; a Triton compile failure is `compile_error`; else by the gate."""
    from rooftop.integrity.sandbox import denial

    if denial(exc):
        return Status.rejected
    kind = type(exc)
    if "CompilationError" in kind.__name__ or (kind.__module__.startswith("triton") and "compil" in str(exc).lower()):
        return Status.compile_error
    return crash_status(gate)


def describe(exc: BaseException, job: EvalJob) -> str:
    """Type and message, plus the innermost line of the solution that was running."""
    from rooftop.integrity.sandbox import denial

    where = ""
    solution_files = {str(f) for f in job.solution.files}
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in solution_files:
            where = f" (at {Path(frame.filename).name}:{frame.lineno}: {(frame.line or '').strip()})"
            break
    text = str(exc).strip().splitlines()
    message = " ".join(text[:3])[:600] if text else ""
    refused = denial(exc)
    prefix = f"[sandbox] {refused}: " if refused else ""
    return f"{prefix}{type(exc).__name__}: {message}{where}"
