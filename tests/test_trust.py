"""The pieces of the trust boundary, one at a time: what crosses it, and what is checked there."""

import time
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES

from rooftop.check.probe import Probe, check_probes, probe_output, same_inputs
from rooftop.check.tensorfile import TensorEntry, dump_tensors, load_tensors
from rooftop.integrity.audit import TamperGuard
from rooftop.integrity.kernels import kernel_share, solution_kernel_names
from rooftop.integrity.sandbox import _python_paths
from rooftop.pipeline.evaluate import make_job, select_shapes
from rooftop.pipeline.job import Settings
from rooftop.pipeline.protocol import Kernel
from rooftop.problem.loader import load_problem
from rooftop.score.hardware import lookup
from rooftop.score.roofline import implausible
from rooftop.solution.loader import load_solution


def test_tensors_cross_as_raw_bytes_and_a_bad_header_is_refused(tmp_path):
    values = [torch.randn(3, 5, dtype=torch.bfloat16), torch.arange(7), torch.tensor([True, False]),
              torch.empty(0, 4)]
    path = tmp_path / "out.bin"
    entries = dump_tensors(path, values)
    back = load_tensors(path, entries)
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(values, back))
    lying = [entries[0].model_copy(update={"nbytes": entries[0].nbytes * 100})]
    with pytest.raises(ValueError, match="do not hold"):
        load_tensors(path, lying)
    with pytest.raises(ValueError, match="unknown dtype"):
        load_tensors(path, [TensorEntry(dtype="object", shape=[1], offset=0, nbytes=1)])


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


def test_the_child_is_told_no_held_out_shape_it_does_not_run():
    problem = load_problem(FIXTURES / "problems" / "scale")
    _, shapes = select_shapes(problem, "visible", "cpu")
    job = make_job(problem, load_solution(FIXTURES / "solutions" / "good.py"), Settings(), "cpu", shapes)
    assert "odd" not in job.model_dump_json()  # the held-out shape's name
    assert "seed" not in {k for k in job.model_dump() if k != "weights_seed"}


def test_the_sandbox_does_not_mount_the_working_folder():
    assert Path.cwd() not in _python_paths()
