"""Engine checks that need a CUDA GPU (run on the GPU machine with `make test-gpu`)."""

import pytest

from conftest import run

pytestmark = pytest.mark.gpu


def test_cuda_timings_and_roofline():
    v = run("scale", "good.py", device="cuda", shapes="all")
    assert v.status.value == "correct"
    assert v.environment.device == "cuda" and v.environment.mode == "gpu" and v.environment.cuda
    for shape in v.shapes:
        assert shape.candidate.clock == shape.reference.clock == "cuda_event"
        assert shape.candidate.n >= 10 and shape.roofline_fraction is not None
    # one shape, drawn in secret, had a profiled call among its timed ones (not a sample)
    assert sum(shape.kernel_share is not None for shape in v.shapes) == 1 and not v.warnings, v.warnings


def test_inline_cuda_builds_once():
    first = run("scale", "cuda_inline_ok.py", device="cuda")
    second = run("scale", "cuda_inline_ok.py", device="cuda")
    assert first.status.value == second.status.value == "correct", first.messages
    [build] = [g for g in second.gates if g.gate.value == "build"]
    assert build.cached is True and build.seconds < 20


def test_standalone_cuda_with_ctypes():
    v = run("scale", "cuda_ctypes_scale", device="cuda", shapes="all")
    assert v.status.value == "correct", v.messages
    [share] = [s.kernel_share for s in v.shapes if s.kernel_share is not None]
    assert share > 0.5  # the solution's own __global__ kernel, found by name in the .cu source


def test_inline_cuda_compile_error_on_gpu():
    v = run("scale", "cuda_inline_broken.py", device="cuda")
    assert v.status.value == "compile_error" and "undeclared_thing" in v.messages[0]


def test_segfault_and_hang_on_gpu():
    assert run("scale", "segfault.py", device="cuda").status.value == "runtime_error"
    assert run("scale", "hang.py", device="cuda", timeout=5).status.value == "timeout"


@pytest.mark.skipif(__import__("rooftop.integrity.sandbox", fromlist=["x"]).bwrap_path() is None,
                    reason="needs bubblewrap (or ROOFTOP_BWRAP pointing at a carried binary)")
def test_bwrap_sandbox_passes_the_gpu_through():
    for solution in ("cuda_inline_ok.py", "triton_scale.py", "cuda_ctypes_scale"):
        v = run("scale", solution, device="cuda", sandbox="bwrap", shapes="all")
        assert v.status.value == "correct" and v.sandbox == "bwrap", (solution, v.messages)
    for solution, words in (("opens_socket.py", "network"), ("writes_system.py", "outside the scratch")):
        v = run("scale", solution, device="cuda", sandbox="bwrap")
        assert v.status.value == "rejected" and words in v.messages[0], (solution, v.messages)


def test_kernel_tracer_sees_every_stream_and_each_kernels_time():
    import torch

    from rooftop.integrity.cupti import trace

    x = torch.randn(1024, 1024, device="cuda")
    side = torch.cuda.Stream()

    def call():
        y = x @ x
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            z = x * 2  # left running on a side stream, never joined
        return y, z

    _, kernels, stream = trace(call)
    assert len(kernels) == 2, [k.name for k in kernels]
    on_caller = [k for k in kernels if k.stream == stream]
    elsewhere = [k for k in kernels if k.stream != stream]
    assert len(on_caller) == 1 and len(elsewhere) == 1
    assert "gemm" in on_caller[0].name.lower() or "sm90" in on_caller[0].name.lower(), on_caller[0].name
    assert all(k.end_ns > k.start_ns for k in kernels)
    # a second trace in the same process is as good as the first
    _, again, _ = trace(lambda: x @ x)
    assert len(again) == 1
