"""The pieces of the trust boundary, one at a time: what crosses it, and what is checked there."""

import time
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES

from rooftop.check.landing import Landed, Landing, LandingTarget
from rooftop.check.probe import Probe, check_probes, probe_output, same_inputs
from rooftop.integrity.audit import TamperGuard
from rooftop.integrity.kernels import kernel_share, solution_kernel_names
from rooftop.integrity.sandbox import python_paths
from rooftop.pipeline.evaluate import make_job, select_shapes
from rooftop.pipeline.wire import Kernel
from rooftop.problem.loader import load_problem
from rooftop.score.hardware import lookup
from rooftop.score.roofline import implausible
from rooftop.solution.loader import load_solution
from rooftop.vocabulary import Settings


def test_outputs_cross_through_shared_memory_and_a_false_report_is_refused():
    expected = [torch.randn(3, 5, dtype=torch.bfloat16), torch.arange(7), torch.tensor([True, False]),
                torch.empty(0, 4)]
    landing = Landing([t.numel() * t.element_size() for t in expected], torch.device("cpu"))
    target = LandingTarget(landing.spec, landing.export(), torch.device("cpu"))
    got = [expected[0] * 2, torch.arange(7), torch.tensor([False, False]), torch.empty(0, 4)]
    landed = target.write(got)
    back = landing.read(landed)
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(got, back))
    # a copy: writing the shared memory afterwards does not change what was read
    target.write([torch.zeros(3, 5, dtype=torch.bfloat16)])
    assert torch.equal(back[0], got[0])
    # an output of the wrong size is reported, not written, and stands as an empty tensor of its shape
    wrong = target.write([torch.randn(4, 5, dtype=torch.bfloat16)])
    assert wrong[0].written is False and landing.read(wrong)[0].shape == (4, 5)
    with pytest.raises(ValueError, match="no region of that size"):
        landing.read([Landed(dtype="bfloat16", shape=[4, 5], written=True)])
    with pytest.raises(ValueError, match="unknown dtype"):
        landing.read([Landed(dtype="object", shape=[1], written=True)])
    target.close()
    landing.close()


def test_outputs_larger_than_the_file_size_limit_cross(tmp_path):
    """The child's file-size rlimit does not bound an output: nothing goes through a file."""
    import subprocess
    import sys

    landing = Landing([8 << 20], torch.device("cpu"))
    fd = landing.export()
    code = (
        "import resource, sys, torch\n"
        "from rooftop.check.landing import LandingSpec, LandingTarget\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
        f"spec = LandingSpec.model_validate_json({landing.spec.model_dump_json()!r})\n"
        "out = torch.full((2 << 20,), 3.5)\n"
        f"print(LandingTarget(spec, {fd}, torch.device('cpu')).write([out])[0].model_dump_json())\n")
    proc = subprocess.run([sys.executable, "-c", code], pass_fds=(fd,), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    back = landing.read([Landed.model_validate_json(proc.stdout.strip().splitlines()[-1])])
    assert torch.equal(back[0].view(torch.float32), torch.full((2 << 20,), 3.5))
    landing.close()


def test_probes_catch_wrong_values_types_and_forged_positions():
    spec = load_problem(FIXTURES / "problems" / "scale").spec
    expected = torch.randn(64, 100)
    assert check_probes(spec, expected, [probe_output(expected.clone())]) == []
    zeros = check_probes(spec, expected, [probe_output(torch.zeros_like(expected))])
    assert zeros and "sampled elements" in zeros[0].message
    assert "shape" in check_probes(spec, expected, [probe_output(expected[:10])])[0].message
    assert "torch.Tensor" in check_probes(spec, expected, [probe_output([1, 2])])[0].message
    forged = probe_output(expected).model_copy(update={"positions": [10**9]})
    assert "not valid" in check_probes(spec, expected, [forged])[0].message
    honest = probe_output(expected)
    for positions in ([-1] + honest.positions[1:], honest.positions[:-1] + [expected.numel()]):
        forged = honest.model_copy(update={"positions": positions})
        assert "not valid" in check_probes(spec, expected, [forged])[0].message
        assert same_inputs([expected], [forged]) == "input 0"  # the inputs' probes are held to the same bounds
    assert same_inputs([expected], [honest]) == ""


def test_probe_positions_are_fresh_each_time():
    x = torch.randn(10_000)
    assert probe_output(x).positions != probe_output(x).positions


def test_inputs_made_elsewhere_must_agree_bit_for_bit():
    x = torch.randn(50)
    assert same_inputs([x, 3], [probe_output(x), Probe(type="int", value=3)]) == ""
    probe = probe_output(x)
    probe.values[0] += 1.0
    assert same_inputs([x], [probe]) == "input 0"


def test_times_beyond_the_hardware_are_implausible():
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    flops = 2 * 8192**3
    assert implausible(h100, "bfloat16", flops, None, flops / 500e12) is None  # half the peak: fine
    assert "TFLOP/s" in implausible(h100, "bfloat16", flops, None, flops / 5000e12)
    assert "GB/s" in implausible(h100, "bfloat16", None, 1e9, 1e9 / 20e12)
    assert implausible(None, "bfloat16", flops, None, 1e-9) is None  # no datasheet: no judgement


def test_solution_kernels_are_named_from_source_and_their_share_computed():
    triton = Path(__file__).parents[1] / "problems/examples/softmax/solutions/triton_softmax.py"
    cuda = Path(__file__).parents[1] / "problems/examples/softmax/solutions/cuda_softmax.py"
    names = solution_kernel_names([triton]) | solution_kernel_names([cuda])
    assert names, "no kernel names found"
    mine = sorted(names)[0]
    kernels = [Kernel(name=f"_Z{len(mine)}{mine}PKfPfi", microseconds=30, stream=7),
               Kernel(name="void at::native::vectorized_elementwise_kernel<4>", microseconds=10, stream=7)]
    assert kernel_share(kernels, names) == pytest.approx(0.75)
    assert kernel_share([], names) is None


def test_replacing_a_guarded_function_is_seen():
    guard = TamperGuard(("time.perf_counter",))
    original = time.perf_counter
    try:
        time.perf_counter = lambda: 0.0
        assert guard.replaced() == ["time.perf_counter"]
    finally:
        time.perf_counter = original
    assert guard.replaced() == []


def test_every_guarded_name_exists_and_a_replaced_method_or_input_maker_is_seen():
    """The guard resolves its names once and reads attributes after each call (no import
    machinery per call); a name that no longer exists would watch nothing, so it is an error."""
    from rooftop.problem import instance

    guard = TamperGuard()  # raises when a guarded name does not resolve
    original_make, original_clone = instance.drawn_inputs, torch.Tensor.clone
    try:
        instance.drawn_inputs = lambda *a: []
        torch.Tensor.clone = lambda self, *a, **k: self
        assert sorted(guard.replaced()) == ["rooftop.problem.instance.drawn_inputs", "torch.Tensor.clone"]
    finally:
        instance.drawn_inputs, torch.Tensor.clone = original_make, original_clone
    assert guard.replaced() == []
    with pytest.raises(RuntimeError, match="does not exist: rooftop.nowhere.thing"):
        TamperGuard(("rooftop.nowhere.thing",))


def test_the_child_is_told_no_held_out_shape_it_does_not_run():
    problem = load_problem(FIXTURES / "problems" / "scale")
    _, shapes = select_shapes(problem, "visible", "cpu")
    job = make_job(problem, load_solution(FIXTURES / "solutions" / "good.py"), Settings(), "cpu", shapes)
    assert "odd" not in job.model_dump_json()  # the held-out shape's name
    assert "seed" not in {k for k in job.model_dump() if k != "weights_seed"}


def test_the_sandbox_does_not_mount_the_working_folder():
    assert Path.cwd() not in python_paths()
