"""The compile check of load_inline sources on a machine without a GPU (build/inline.py) and the
settings of JIT builds in the child (build/jit.py)."""

import os
import sysconfig
import textwrap

import pytest
from conftest import HAS_NVCC

from rooftop.build.inline import compile_check_inline, compile_commands, environment_gap, source_files
from rooftop.build.jit import cuda_arch_list, jit_env, usable_cores
from rooftop.build.toolchain import trim_compiler_log
from rooftop.solution.loader import InlineCall, load_solution

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
DECLARATION = "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);"
# the KernelBench template: the CUDA source includes torch/extension.h itself
KERNELBENCH = InlineCall(name="elementwise_add", cpp=[DECLARATION], functions=["elementwise_add_cuda"],
                         cuda=["#include <torch/extension.h>\n#include <cuda_runtime.h>\n" + KERNEL])


FLAGS = ["-O3", "--use_fast_math"]


def _solution(tmp_path, body: str):
    path = tmp_path / "solution.py"
    path.write_text(textwrap.dedent(body))
    return load_solution(path)


def test_the_scan_reads_each_call_with_its_bindings_and_flags(tmp_path):
    sol = _solution(tmp_path, '''
        from torch.utils.cpp_extension import load_inline
        SRC = "__global__ void k() {}"
        FLAGS = ["-O3", "--use_fast_math"]
        a = load_inline(name="ext_a", cpp_sources="void f();", cuda_sources=SRC, functions=["f", "g"],
                        extra_cuda_cflags=FLAGS, extra_cflags=["-O3"], with_pytorch_error_handling=False)
        b = load_inline("ext_b", "int h(int);", functions={"h": "doc"}, verbose=True)
        c = load_inline(name="ext_c", cpp_sources="", cuda_sources=SRC, extra_cuda_cflags=make_flags())
    ''')
    a, b, c = sol.inline.calls
    assert (a.name, a.functions, a.extra_cuda_cflags, a.extra_cflags) == ("ext_a", ["f", "g"], FLAGS, ["-O3"])
    assert a.cuda == ["__global__ void k() {}"] and not a.with_pytorch_error_handling and a.resolved
    assert (b.name, b.cpp, b.cuda, b.functions, b.resolved) == ("ext_b", ["int h(int);"], [], ["h"], True)
    assert c.resolved is False and sol.inline.resolved  # a flag made at run time; the sources were read


def test_source_files_are_the_ones_torch_writes(tmp_path, monkeypatch):
    """load_inline itself (its compile step stubbed out) writes exactly what the check compiles."""
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "_jit_compile", lambda *args, **kwargs: None)
    for call in (KERNELBENCH, KERNELBENCH.model_copy(update={"with_pytorch_error_handling": False}),
                 KERNELBENCH.model_copy(update={"no_implicit_headers": True, "functions": None})):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        cpp_extension.load_inline(name="x", cpp_sources=list(call.cpp), cuda_sources=list(call.cuda),
                                  functions=call.functions, build_directory=str(folder),
                                  with_pytorch_error_handling=call.with_pytorch_error_handling,
                                  no_implicit_headers=call.no_implicit_headers)
        ours = source_files(call)
        assert ours == {"main.cpp": (folder / "main.cpp").read_text(), "cuda.cu": (folder / "cuda.cu").read_text()}


@pytest.fixture
def cuda_root(tmp_path, monkeypatch):
    """A CUDA root as torch looks for one, so the flags can be taken on a machine without CUDA."""
    root = tmp_path / "cuda"
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime.h").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(root))
    return root


def test_the_flags_are_torchs_for_the_target_gpu(tmp_path, cuda_root, monkeypatch):
    from torch.utils import cpp_extension

    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    home_before = cpp_extension.CUDA_HOME
    call = KERNELBENCH.model_copy(update={"extra_cuda_cflags": ["-O3", "--use_fast_math"], "extra_cflags": ["-O2"]})
    main, cuda = compile_commands(call, 0, tmp_path / "check", None, "/opt/nvcc-here/nvcc")
    python_include = sysconfig.get_path("include", scheme="posix_prefix")
    for command in (main.command, cuda.command):
        assert "-DTORCH_EXTENSION_NAME=elementwise_add" in command and "-DTORCH_API_INCLUDE_EXTENSION_H" in command
        assert python_include in command and any(f.startswith("-std=c++") for f in command)
    assert main.command[-4:] == ["-c", "main.cpp", "-o", "main.o"] and "-O2" in main.command and "-fPIC" in main.command
    assert cuda.command[0] == "/opt/nvcc-here/nvcc" and "-gencode=arch=compute_90a,code=sm_90a" in cuda.command
    assert {"--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__", "-O3", "--use_fast_math"} <= set(cuda.command)
    assert ["--compiler-options", "-fPIC"] == cuda.command[cuda.command.index("--compiler-options"):][:2]
    assert f"{cpp_extension.CUDA_HOME or cuda_root}/include" in cuda.command
    # what the check borrowed from torch is given back
    assert "TORCH_CUDA_ARCH_LIST" not in os.environ and cpp_extension.CUDA_HOME == home_before

    ampere = compile_commands(call, 0, tmp_path / "a100", (8, 0), "nvcc")[1].command
    assert "-gencode=arch=compute_80,code=sm_80" in ampere
    own_arch = call.model_copy(update={"extra_cuda_cflags": ["-arch=sm_90a"]})
    assert not any("gencode" in f for f in compile_commands(own_arch, 0, tmp_path / "own", None, "nvcc")[1].command)


def test_a_header_this_machine_lacks_is_not_the_candidates_error():
    log = "CUDAContextLight.h:10:10: fatal error: cusparse.h: No such file or directory"
    assert environment_gap(log) == "cusparse.h is not installed on this machine"
    assert environment_gap('cuda.cu(8): error: identifier "x" is undefined') is None


def test_jit_settings_target_the_present_gpu_and_every_usable_core(tmp_path, monkeypatch):
    assert cuda_arch_list((9, 0)) == "9.0a" and cuda_arch_list((8, 6)) == "8.6" and cuda_arch_list(None) == "9.0a"
    assert cuda_arch_list((10, 0)) == "10.0a"
    monkeypatch.delenv("MAX_JOBS", raising=False)
    env = jit_env(tmp_path, (9, 0))
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0a" and env["MAX_JOBS"] == str(usable_cores())
    assert env["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "torch_extensions")
    assert usable_cores() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("MAX_JOBS", "3")
    cpu = jit_env(tmp_path, None)
    assert "MAX_JOBS" not in cpu and "TORCH_CUDA_ARCH_LIST" not in cpu  # the user's count stands


def test_jit_builds_track_no_system_headers_as_the_folder_key_stands_for_them(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES", raising=False)
    assert jit_env(tmp_path, (9, 0))["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] == "1"
    monkeypatch.setenv("TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES", "0")
    assert "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES" not in jit_env(tmp_path, (9, 0))  # the user's choice stands


# -- with the real compilers (tens of seconds each) ------------------------------------------------------
needs_nvcc = pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")

BROKEN = KERNELBENCH.model_copy(update={"cuda": [KERNEL.replace("a[i] + b[i]", "a[i] + undeclared_thing")]})
MISMATCHED = InlineCall(name="scale", cpp=["torch::Tensor scale(torch::Tensor x, double alpha);"], functions=["scale"],
                        cuda=["torch::Tensor scale(torch::Tensor x, float alpha) { return x * alpha; }"])


def test_a_failing_compile_is_the_check_s_verdict_and_leaves_no_mark(tmp_path, monkeypatch):
    """What the check makes of a compiler's failure, with stand-in compilers (the real nvcc's error
    line, through the whole pipeline, is test_pipeline's inline compile-error test)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, script in {"nvcc": 'echo \'cuda.cu(8): error: identifier "undeclared_thing" is undefined\'; exit 1',
                         "cxx": 'touch main.o'}.items():
        (tools / name).write_text(f"#!/bin/sh\n{script}\n")
        (tools / name).chmod(0o755)
    monkeypatch.setenv("ROOFTOP_NVCC", str(tools / "nvcc"))
    monkeypatch.setenv("CXX", str(tools / "cxx"))
    result = compile_check_inline([BROKEN], tmp_path / "check", None, timeout=60)
    assert not result.ok and not result.unchecked
    error = 'cuda.cu(8): error: identifier "undeclared_thing" is undefined'
    assert trim_compiler_log(result.log).splitlines()[0] == error
    assert not (tmp_path / "check" / "inline-check.ok").exists()
    assert not compile_check_inline([BROKEN], tmp_path / "check", None, timeout=60).cached  # a failure is not kept


@needs_nvcc
@pytest.mark.slow
def test_a_binding_whose_definition_differs_fails_as_it_would_at_import(tmp_path):
    """Declared with `double`, defined with `float`: both files compile, the import would not link.
    (A source that compiles, in KernelBench's template, is test_pipeline's inline test.)"""
    result = compile_check_inline([MISMATCHED], tmp_path, None, timeout=600)
    assert not result.ok
    assert "binds scale(at::Tensor, double)" in result.log and "define scale(at::Tensor, float)" in result.log


@needs_nvcc
def test_a_missing_header_leaves_the_source_unchecked_not_failed(tmp_path):
    call = InlineCall(name="plain", cpp=["int f(int x) { return x; }"], no_implicit_headers=True,
                      cuda=["#include <rooftop_no_such_header.h>\n__global__ void k() {}"])
    result = compile_check_inline([call], tmp_path, None, timeout=600)
    assert result.ok and result.unchecked == "rooftop_no_such_header.h is not installed on this machine"
    assert not (tmp_path / "inline-check.ok").exists()


@needs_nvcc
def test_a_compiler_that_cannot_run_here_leaves_the_source_unchecked(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-g++"))
    call = InlineCall(name="plain", cpp=["int f(int x) { return x; }"], no_implicit_headers=True,
                      cuda=["__global__ void k() {}"])
    result = compile_check_inline([call], tmp_path, None, timeout=600)
    assert result.ok and result.unchecked == f"{tmp_path / 'no-such-g++'} could not be run here"
