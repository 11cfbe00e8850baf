"""load_inline sources compile-checked on a machine without a GPU, as torch builds them on one.

`load_inline` writes the call's C++ strings to main.cpp, after `#include <torch/extension.h>` and
followed by a pybind11 module that binds `functions=`, and its CUDA strings to cuda.cu, after
torch/types.h, cuda.h and cuda_runtime.h; then ninja compiles both with the flags torch's ninja
writer chose. The check writes the same two files and takes the flags from that same writer, run
for the target GPU's architecture: torch's include folders and Python's, its defines
(TORCH_EXTENSION_NAME, TORCH_API_INCLUDE_EXTENSION_H), C++ standard, nvcc flags and the call's own
extra flags, so a source that passes here builds there with the same torch. Both files compile in
parallel (nvcc is the long pole; the host compile of main.cpp costs no extra wall time where two
cores are free), and each bound function is then looked up in the objects: a declaration whose
definition differs (a `float` for a `double`) compiles but fails at import on the GPU.

What the check cannot see is said, not blamed on the candidate: a header this machine lacks (the
CUDA math libraries' headers that ATen/cuda/CUDAContext.h includes, for one), or a call whose
sources are made at run time.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rooftop.build.jit import cuda_arch_list, usable_cores
from rooftop.build.toolchain import BuildResult, nvcc_path

MARKER = "inline-check.ok"
# headers load_inline puts in front of the sources (unless no_implicit_headers)
CPP_PRELUDE = ["#include <torch/extension.h>"]
CUDA_PRELUDE = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
MISSING_HEADER = re.compile(r"fatal error: ([^:\s]+): No such file or directory")
MISSING_TOOL = re.compile(r"rooftop could not start (\S+?):")
UNSUPPORTED_ARCH = re.compile(r"nvcc fatal\s*:\s*Unsupported gpu architecture '([^']+)'")


class InlineCallSpec(Protocol):
    """One load_inline call as the static scan read it (solution.loader.InlineCall)."""

    @property
    def name(self) -> str | None: ...
    @property
    def cpp(self) -> list[str]: ...
    @property
    def cuda(self) -> list[str]: ...
    @property
    def functions(self) -> list[str] | None: ...
    @property
    def extra_cflags(self) -> list[str]: ...
    @property
    def extra_cuda_cflags(self) -> list[str]: ...
    @property
    def extra_ldflags(self) -> list[str]: ...
    @property
    def extra_include_paths(self) -> list[str]: ...
    @property
    def with_pytorch_error_handling(self) -> bool: ...
    @property
    def no_implicit_headers(self) -> bool: ...


@dataclass
class Compile:
    """One compiler run of the check."""

    label: str  # main.cpp or cuda.cu of one call
    command: list[str]
    cwd: Path
    output: str = ""
    returncode: int | None = None


class Unchecked(Exception):
    """The check could not run here (torch's writer, a missing tool); not the candidate's fault."""


def extension_name(call: InlineCallSpec, index: int) -> str:
    return call.name if call.name and call.name.isidentifier() else f"rooftop_inline_{index}"


def source_files(call: InlineCallSpec) -> dict[str, str]:
    """main.cpp and (when the call has CUDA sources) cuda.cu, as load_inline writes them."""
    cpp = ([] if call.no_implicit_headers else list(CPP_PRELUDE)) + list(call.cpp)
    if call.functions is not None:
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for function in call.functions:
            bound = f"torch::wrap_pybind_function({function})" if call.with_pytorch_error_handling else function
            cpp.append(f'm.def("{function}", {bound}, "{function}");')
        cpp.append("}")
    files = {"main.cpp": "\n".join(cpp)}
    if call.cuda:
        files["cuda.cu"] = "\n".join(([] if call.no_implicit_headers else CUDA_PRELUDE) + list(call.cuda))
    return files


def cuda_home(nvcc: str) -> str | None:
    """The CUDA root torch would use: torch's own when it was built with CUDA, else $CUDA_HOME,
    $CUDA_PATH, the folder above nvcc's, /usr/local/cuda (the first that has the runtime's header)."""
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME:
        return cpp_extension.CUDA_HOME
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                  str(Path(nvcc).resolve().parent.parent), "/usr/local/cuda"]
    for root in candidates:
        if root and (Path(root) / "include" / "cuda_runtime.h").exists():
            return root
    return next((root for root in candidates if root and Path(root).is_dir()), None)


@contextlib.contextmanager
def _torch_targeting(arch_list: str, home: str | None) -> Iterator[object]:
    """torch.utils.cpp_extension set up as on the target GPU machine: its architecture list, and a
    CUDA root even where torch was built without CUDA."""
    from torch.utils import cpp_extension

    saved_arch, saved_home = os.environ.get("TORCH_CUDA_ARCH_LIST"), cpp_extension.CUDA_HOME
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
    if not saved_home:
        cpp_extension.CUDA_HOME = home
    try:
        yield cpp_extension
    finally:
        cpp_extension.CUDA_HOME = saved_home
        if saved_arch is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved_arch


def torch_build_file(call: InlineCallSpec, name: str, folder: Path, arch_list: str, nvcc: str) -> dict[str, str]:
    """The variables (cxx, cflags, nvcc, cuda_cflags, ...) of the build.ninja torch writes for this call."""
    sources = [str(folder / f) for f in source_files(call)]
    values = {"path": str(folder / "build.ninja"), "name": name, "sources": sources,
              "extra_cflags": list(call.extra_cflags), "extra_cuda_cflags": list(call.extra_cuda_cflags),
              "extra_sycl_cflags": [], "extra_ldflags": [], "extra_include_paths": list(call.extra_include_paths),
              "with_cuda": bool(call.cuda), "with_sycl": False, "is_standalone": False, "is_python_module": True,
              "torch_exclude": False}
    with _torch_targeting(arch_list, cuda_home(nvcc)) as cpp_extension:
        writer = getattr(cpp_extension, "_write_ninja_file_to_build_library", None)
        if writer is None:
            raise Unchecked("this torch has no ninja writer to take its build flags from")
        wanted = inspect.signature(writer).parameters
        unknown = [p for p in wanted if p not in values]
        if unknown:
            raise Unchecked(f"this torch's ninja writer takes arguments rooftop does not know ({', '.join(unknown)})")
        try:
            writer(**{p: values[p] for p in wanted})
        except (OSError, ValueError, RuntimeError) as exc:
            raise Unchecked(f"torch could not write its build file here: {exc}") from exc
    text = (folder / "build.ninja").read_text()
    return {k: v.strip() for k, v in re.findall(r"^(\w+) =(.*)$", text, re.MULTILINE)}


def compile_commands(call: InlineCallSpec, index: int, folder: Path, capability: tuple[int, int] | None,
                     nvcc: str) -> list[Compile]:
    """Write the call's files into `folder` and say how torch would compile each (objects only)."""
    folder.mkdir(parents=True, exist_ok=True)
    for file, text in source_files(call).items():
        (folder / file).write_text(text)
    name = extension_name(call, index)
    ninja = torch_build_file(call, name, folder, cuda_arch_list(capability), nvcc)

    def flags(variable: str) -> list[str]:
        return shlex.split(ninja.get(variable, ""))

    jobs = [Compile(f"{name}/main.cpp", [*flags("cxx"), *flags("cflags"), "-c", "main.cpp", "-o", "main.o",
                                         *flags("post_cflags")], folder)]
    if call.cuda:  # torch's nvcc is CUDA_HOME's; this one is rooftop's (ROOFTOP_NVCC, the PATH)
        jobs.append(Compile(f"{name}/cuda.cu", [nvcc, *flags("cuda_cflags"), "-c", "cuda.cu", "-o", "cuda.cuda.o",
                                                *flags("cuda_post_cflags")], folder))
    return jobs


def run_compiles(jobs: Sequence[Compile], deadline: float) -> None:
    """Run the compiles in parallel (one per usable core); each records its output and status."""
    def one(job: Compile) -> None:
        try:
            proc = subprocess.Popen(job.command, cwd=job.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)
        except OSError as exc:
            job.output, job.returncode = f"rooftop could not start {job.command[0]}: {exc.strerror}", 127
            return
        try:
            job.output, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            job.returncode = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # nvcc's own children (cicc, cudafe++) with it
            job.output = (proc.communicate()[0] or "") + "\n(stopped: the compile check ran out of time)"
            job.returncode = -signal.SIGKILL

    with ThreadPoolExecutor(max_workers=min(len(jobs), usable_cores()) or 1) as pool:
        list(pool.map(one, jobs))


def environment_gap(log: str) -> str | None:
    """What this machine lacks that a GPU machine has, when that is why a compile failed."""
    missing = MISSING_HEADER.search(log)
    if missing:
        return f"{missing.group(1)} is not installed on this machine"
    tool = MISSING_TOOL.search(log)
    if tool:
        return f"{tool.group(1)} could not be run here"
    arch = UNSUPPORTED_ARCH.search(log)
    if arch:
        return f"this nvcc cannot build for {arch.group(1)}"
    return None


def unbound_functions(call: InlineCallSpec, jobs: Sequence[Compile]) -> list[str]:
    """Bound functions that main.cpp uses but no object of the call defines (an undefined symbol at
    import on the GPU). Skipped when the call links libraries of its own or nm is missing."""
    nm = shutil.which("nm")
    if not call.functions or call.extra_ldflags or nm is None:
        return []
    folder = jobs[0].cwd
    objects = [folder / "main.o"] + ([folder / "cuda.cuda.o"] if call.cuda else [])
    undefined = _symbols(nm, objects[0], "--undefined-only")
    defined = {name for obj in objects for name in _symbols(nm, obj, "--defined-only", exported=True)}
    problems = []
    for function in call.functions:
        used = [s for s in undefined if s == function or s.startswith(function + "(")]
        for symbol in used:
            if symbol not in defined:
                near = sorted(d for d in defined if d.startswith(function + "("))
                found = f"; the sources define {', '.join(near)}" if near else "; no source defines it"
                problems.append(f"functions=[{function!r}] binds {symbol}{found} "
                                "(the import would fail with an undefined symbol)")
    return problems


def _symbols(nm: str, obj: Path, which: str, exported: bool = False) -> set[str]:
    out = subprocess.run([nm, "-C", which, str(obj)], capture_output=True, text=True, timeout=60).stdout
    names = set()
    for line in out.splitlines():
        match = re.match(r"^(?:[0-9a-fA-F]{8,16})?\s+([A-Za-z?]) (.+)$", line)
        if match and (not exported or match.group(1).isupper() or match.group(1) in "uivw"):
            names.add(match.group(2))
    return names


def compile_check_inline(calls: Sequence[InlineCallSpec], out_dir: Path, capability: tuple[int, int] | None,
                         timeout: float) -> BuildResult:
    """Compile every call's main.cpp and cuda.cu to objects as torch would for the target GPU (no
    link, no GPU). `unchecked` says why nothing could be concluded, when that is so."""
    started = time.monotonic()
    if (out_dir / MARKER).exists():
        return BuildResult(ok=True, cached=True)
    nvcc = nvcc_path()
    if nvcc is None:
        return BuildResult(ok=True, unchecked="nvcc was not found")
    try:
        per_call = [compile_commands(c, i, out_dir / "inline-check" / str(i), capability, nvcc)
                    for i, c in enumerate(calls)]
    except Unchecked as exc:
        return BuildResult(ok=True, unchecked=str(exc))
    jobs = [job for call_jobs in per_call for job in call_jobs]
    run_compiles(jobs, started + timeout)
    seconds = time.monotonic() - started
    failed = [job for job in jobs if job.returncode != 0]
    errors = [job for job in failed if environment_gap(job.output) is None]
    if errors:
        return BuildResult(ok=False, seconds=seconds, log="\n".join(f"{j.label}:\n{j.output}" for j in errors))
    if failed:  # a fatal error from what this machine lacks stops that compile: nothing is concluded
        gaps = sorted({gap for job in failed if (gap := environment_gap(job.output))})
        return BuildResult(ok=True, seconds=seconds, log="\n".join(j.output for j in failed), unchecked="; ".join(gaps))
    unbound = [p for call, call_jobs in zip(calls, per_call) for p in unbound_functions(call, call_jobs)]
    if unbound:
        return BuildResult(ok=False, seconds=seconds, log="error: " + "\nerror: ".join(unbound))
    (out_dir / MARKER).write_text("ok\n")
    return BuildResult(ok=True, seconds=time.monotonic() - started, log="\n".join(j.output for j in jobs))
