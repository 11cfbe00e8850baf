"""CUDA and C++ built by `torch.utils.cpp_extension.load_inline` when the solution is imported.

On a GPU the import builds them (with build/jit.py's settings); on a machine without one the calls
the static scan could read are compile-checked with torch's own flags (build/inline.py).
"""

from __future__ import annotations

from rooftop.build.backends import BACKENDS, Backend, BuildRequest, Checked, SourceScan
from rooftop.build.inline import compile_check_inline
from rooftop.build.jit import cuda_arch_list
from rooftop.build.toolchain import trim_compiler_log
from rooftop.verdict import GateFailed, Status

BUILDERS = frozenset({"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"})


class CudaInline(Backend):
    """load_inline with CUDA sources (or sources made at run time, which may be CUDA)."""

    name, rank, family = "cuda_inline", 2, "cuda"
    compiled, needs_gpu = True, True
    runtime_modules = ("torch.utils.cpp_extension",)
    kernel_markers = BUILDERS
    prompt_route = ("- CUDA C++: sources compiled with `torch.utils.cpp_extension.load_inline(...)` when the file is "
                    "imported. Do not pass `build_directory`: the evaluator chooses the build folder.")

    def recognise(self, scan: SourceScan) -> bool:
        return scan.inline is not None and bool(scan.inline.cuda or not scan.inline.resolved)

    def check_without_gpu(self, request: BuildRequest) -> Checked:
        """Compile-check the calls the static scan could read, with torch's flags for the target GPU;
        what could not be checked is said, not blamed on the solution."""
        inline = request.inline
        calls = [call for call in inline.calls if call.cuda and call.resolved]
        checked = Checked()
        if calls:
            result = compile_check_inline(calls, request.folder, request.capability, request.timeout)
            checked.cached = result.cached
            if not result.ok:
                raise GateFailed(Status.compile_error, "the load_inline sources fail to build (checked as torch "
                                 f"builds them on the GPU):\n{trim_compiler_log(result.log)}")
            if result.unchecked:
                checked.notes.append(f"its load_inline sources could not be compile-checked here: {result.unchecked}")
            else:
                checked.notes.append(f"its load_inline CUDA source compiles with nvcc for sm_"
                                     f"{cuda_arch_list(request.capability).replace('.', '')} and its binding with "
                                     "the host compiler")
        if not inline.resolved or any(call.cuda and not call.resolved for call in inline.calls):
            checked.notes.append("some of its load_inline sources or flags are made at run time and were not "
                                 "compile-checked")
        return checked


class CppInline(Backend):
    """load_inline with C++ sources only: built at import, runs without a GPU."""

    name, rank, family = "cpp_inline", 3, "cuda"
    compiled = True
    runtime_modules = ("torch.utils.cpp_extension",)
    kernel_markers = BUILDERS

    def recognise(self, scan: SourceScan) -> bool:
        return scan.inline is not None and not CudaInline().recognise(scan)


BACKENDS.add(CudaInline.name, CudaInline())
BACKENDS.add(CppInline.name, CppInline())
