"""Every status of the gated pipeline, on the CPU, with real child processes."""

import os

import pytest
from conftest import FIXTURES, HAS_NVCC, run


@pytest.mark.quiet
def test_correct_with_cpu_timings():
    v = run("scale", "good.py")
    assert v.status.value == "correct" and v.failed_gate is None
    assert [g.gate.value for g in v.gates] == ["static", "build", "load", "correctness", "timing", "score"]
    assert v.environment.device == "cpu" and v.environment.mode == "cpu"
    [shape] = v.shapes
    assert shape.split == "smoke" and shape.correct and len(shape.checks) == 3
    assert len({c.seed for c in shape.checks}) == 3  # three fresh seeds
    assert shape.candidate.clock == "cpu_perf_counter" and shape.candidate.n >= 3
    assert shape.reference.n >= 3 and shape.speedup > 0 and shape.gbps > 0
    assert shape.roofline_fraction is None  # no datasheet roof for a CPU
    if "contention" in shape.flags:  # a busy machine (the suite's other worker): the speedup counts as 0x
        assert v.reward == pytest.approx(-1.0)
    else:
        assert v.reward == pytest.approx(v.summary.geomean_speedup - 1)


def test_the_phases_say_where_each_kind_of_call_spent_its_round_trips():
    v = run("scale", "good.py")
    phases = v.phases
    # a timed call is one of a block (pipeline/trusted/calls.py): the block's wait for its calls comes last
    for kind, last in (("checked_calls", "checks"), ("timed_calls", "wait")):
        trip = phases[f"{kind}_round_trip"]
        steps = [phases[f"{kind}_child_{step}"] for step in ("inputs", "clock", "probes", last)]
        assert 0 < sum(steps) <= trip, (kind, phases)
    assert phases["timed_output_checks"] >= 0 and phases["reference"] > 0


def test_triton_runs_in_the_interpreter_on_cpu():
    v = run("scale", "triton_scale.py", shapes="all")
    assert v.status.value == "correct", v.messages
    assert v.environment.mode == "cpu+triton-interpreter"
    assert {s.split for s in v.shapes} == {"visible", "held_out"}


def test_incorrect_names_shape_seed_and_errors():
    v = run("scale", "wrong.py", seed=7)
    assert v.status.value == "incorrect" and v.reward == -2 and v.failed_gate.value == "correctness"
    [message] = v.messages
    assert "shape 'tiny'" in message and "seed" in message and "max abs error" in message
    failing = v.shapes[0].checks[-1]
    assert not failing.ok and failing.max_abs_error > 0 and failing.atol == 1e-4


def test_seeds_are_reproducible_with_a_base_seed():
    a, b = run("scale", "good.py", seed=3, timing=False), run("scale", "good.py", seed=3, timing=False)
    assert [c.seed for c in a.shapes[0].checks] == [c.seed for c in b.shapes[0].checks]
    assert a.reward == 0.0  # correct but untimed


def test_runtime_error_points_at_the_line():
    v = run("scale", "runtime_error.py")
    assert v.status.value == "runtime_error" and v.reward == -3
    assert "runtime_error.py:9" in v.messages[0] and "RuntimeError" in v.messages[0]


def test_init_error():
    v = run("scale", "init_error.py")
    assert v.status.value == "init_error" and v.reward == -4 and "alpha must be a tensor" in v.messages[0]


@pytest.mark.parametrize("solution,where", [("syntax_error.py", "static"), ("import_error.py", "build")])
def test_compile_error(solution, where):
    v = run("scale", solution)
    assert v.status.value == "compile_error" and v.reward == -5 and v.failed_gate.value == where


def test_rejected_names_the_rule_and_line():
    v = run("scale", "forbidden.py")
    assert v.status.value == "rejected" and v.reward == -2
    assert "forbidden-op" in v.messages[0] and "line 11" in v.messages[0] and "torch.mul" in v.messages[0]


@pytest.mark.parametrize("solution", ["mutates_input.py", "aliases_input.py"])
def test_input_mutation_fails(solution):
    v = run("scale", solution)
    assert v.status.value == "incorrect" and "in place" in v.messages[0]


def test_output_aliasing_an_input_fails():
    v = run("copy", "returns_input.py")
    assert v.status.value == "incorrect" and "shares storage with input(s) [0]" in v.messages[0]


def test_reference_weights_are_copied():
    v = run("linear", "linear_other_init.py")
    assert v.status.value == "correct", v.messages
    assert v.gates[2].detail == "weights copied"


def test_a_broken_reference_is_an_internal_error_not_the_candidates_fault():
    v = run("broken_reference", "good.py")
    assert v.status.value == "internal_error" and v.reward == -6
    assert "reference forward of the problem failed" in v.messages[0]


def test_asking_for_shapes_the_problem_lacks_is_a_usage_error():
    from rooftop.errors import UserError

    with pytest.raises(UserError, match="--shapes held_out: problem 'linear' has no held_out shapes"):
        run("linear", "linear_other_init.py", shapes="held_out")


# -- isolation: the candidate cannot take the caller down ----------------------------------------
def test_os_exit_in_the_candidate():
    v = run("scale", "os_exit.py")
    assert v.status.value == "runtime_error" and "exited with status 0" in v.messages[0]
    assert os.getpid() > 0  # we are still here


def test_segfault_in_the_candidate():
    v = run("scale", "segfault.py")
    assert v.status.value == "runtime_error" and "SIGSEGV" in v.messages[0]


def test_hang_times_out_within_the_gate_limit():
    v = run("scale", "hang.py", timeout=3)
    assert v.status.value == "timeout" and v.reward == -7 and v.failed_gate.value == "correctness"
    assert "3 s limit" in v.messages[0]


# -- CUDA sources on a machine without a GPU ----------------------------------------------------------
@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_inline_cuda_is_compiled_then_needs_gpu(tmp_path):
    """KernelBench's template (its CUDA source includes torch/extension.h itself), compiled with
    torch's flags for the GPU, then found compiled."""
    solution = tmp_path / "cuda_inline_kernelbench.py"
    solution.write_text((FIXTURES / "solutions" / "cuda_inline_ok.py").read_text().replace(
        'CUDA_SRC = r"""\n', 'CUDA_SRC = r"""\n#include <torch/extension.h>\n', 1))
    assert "#include <torch/extension.h>" in solution.read_text()
    v = run("scale", solution)
    assert v.status.value == "needs_gpu" and v.reward is None
    assert "compiles with nvcc" in v.messages[0] and v.environment.mode == "cpu (compile check only)"
    again = run("scale", solution)
    assert again.gates[-1].gate.value == "build" and again.gates[-1].cached
    assert not v.gates[-1].cached


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_inline_cuda_compile_error_is_caught_without_a_gpu():
    v = run("scale", "cuda_inline_broken.py")
    assert v.status.value == "compile_error"
    first = v.messages[0].splitlines()[1]  # the compiler's first error, under the gate's own line
    assert first.startswith("cuda.cu(") and first.endswith('error: identifier "undeclared_thing" is undefined')


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_standalone_cu_builds_once_then_is_cached():
    first = run("scale", "cuda_ctypes_scale")
    second = run("scale", "cuda_ctypes_scale")
    assert first.status.value == second.status.value == "needs_gpu"
    assert ".cu files compile" in first.messages[0]
    [b1], [b2] = ([g for g in v.gates if g.gate.value == "build"] for v in (first, second))
    assert b1.cached is False and b2.cached is True


def test_without_nvcc_cuda_is_reported_as_needing_a_gpu(monkeypatch):
    monkeypatch.setenv("ROOFTOP_NVCC", "none")
    v = run("scale", "cuda_inline_ok.py")
    assert v.status.value == "needs_gpu" and "not compile-checked" in v.messages[0]


def test_an_import_that_relinks_a_library_in_place_is_not_reported_as_cached(tmp_path):
    """load_inline's ninja can find an object out of date and relink the same .so path: that import
    compiled, and the build gate must not say its build came from the cache."""
    solution = tmp_path / "relinks.py"
    solution.write_text(
        "import os\nimport torch.nn as nn\n\n"
        "library = os.path.join(os.environ['ROOFTOP_BUILD_DIR'], 'ext.so')\n"
        "with open(library, 'ab') as f:\n    f.write(b'x')  # relinked on every import\n\n\n"
        "class ModelNew(nn.Module):\n    def __init__(self, alpha):\n        super().__init__()\n"
        "        self.alpha = alpha\n\n    def forward(self, x):\n        return x * self.alpha\n")
    verdicts = [run("scale", solution, timing=False) for _ in range(2)]
    assert [v.status.value for v in verdicts] == ["correct", "correct"], verdicts[-1].messages
    builds = [next(g for g in v.gates if g.gate.value == "build") for v in verdicts]
    assert [b.cached for b in builds] == [False, False]
