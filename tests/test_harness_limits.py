"""A limit or failure of the harness itself is `internal_error` with its reason, never the
candidate's status; a candidate's own failure to allocate stays its `runtime_error`, and says so."""

import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import FIXTURES, fixture_problem, run

from rooftop.check.landing import Landed, Landing, LandingError
from rooftop.pipeline.child.call import harness_step
from rooftop.pipeline.trusted.memory import plan_pools, shape_sizes
from rooftop.problem.instance import ProblemInstance
from rooftop.verdict import GateFailed, Status


def _solution(tmp_path, body: str):
    path = tmp_path / "solution.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_an_output_larger_than_the_childs_file_size_limit_crosses(tmp_path):
    """The child's file-size rlimit once bounded every output (they went through a file): now an
    output crosses in shared memory, and the child exiting right after does not lose it."""
    landing = Landing([8 << 20], torch.device("cpu"))
    fd = landing.export()
    code = textwrap.dedent(f"""
        import resource, torch
        from rooftop.check.landing import LandingSpec, LandingTarget
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        spec = LandingSpec.model_validate_json({landing.spec.model_dump_json()!r})
        print(LandingTarget(spec, {fd}, torch.device("cpu")).write([torch.full((2 << 20,), 3.5)])[0].model_dump_json())
    """)
    proc = subprocess.run([sys.executable, "-c", code], pass_fds=(fd,), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [back] = landing.read([Landed.model_validate_json(proc.stdout.strip().splitlines()[-1])])
    assert torch.equal(back, torch.full((2 << 20,), 3.5))
    landing.close()


def test_shared_memory_that_cannot_be_made_is_an_internal_error(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise LandingError("the shared memory for 4096 bytes of outputs could not be made: no space left")

    monkeypatch.setattr("rooftop.pipeline.trusted.calls.Landing", refuse)
    v = run("scale", "good.py", timing=False)
    assert v.status is Status.internal_error and v.failed_gate.value == "correctness"
    assert "[harness]" in v.messages[0] and "could not be made" in v.messages[0]


def test_a_harness_step_in_the_child_that_fails_is_an_internal_error():
    with pytest.raises(GateFailed) as failed, harness_step("snapshotting the inputs"):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
    assert failed.value.status is Status.internal_error
    assert failed.value.messages[0].startswith("[harness] snapshotting the inputs failed in the evaluation child")


def test_the_trusted_side_running_out_of_memory_is_an_internal_error(tmp_path):
    problem = tmp_path / "problem"
    (problem).mkdir()
    (problem / "problem.yaml").write_text((FIXTURES / "problems" / "scale" / "problem.yaml").read_text())
    (problem / "reference.py").write_text((FIXTURES / "problems" / "scale" / "reference.py").read_text().replace(
        "        return x * self.alpha",
        "        import os\n        if os.environ.get('ROOFTOP_SANDBOX') is None:  # the trusted side only\n"
        "            raise MemoryError('host memory exhausted')\n        return x * self.alpha"))
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.problem.loader import load_problem
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    v = evaluate(load_problem(problem), load_solution(FIXTURES / "solutions" / "good.py"),
                 Settings(device="cpu", timeout=60, timing=False))
    assert v.status is Status.internal_error
    assert "reference forward" in v.messages[0] and "MemoryError" in v.messages[0]


def test_the_candidates_own_out_of_memory_stays_its_runtime_error(tmp_path):
    solution = _solution(tmp_path, """
        import torch
        import torch.nn as nn

        class ModelNew(nn.Module):
            def __init__(self, alpha):
                super().__init__()
                self.alpha = alpha

            def forward(self, x):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 900.00 GiB")
    """)
    v = run("scale", solution, timing=False)
    assert v.status is Status.runtime_error
    assert "[memory] an allocation of the candidate's own failed" in v.messages[0]
    assert "900.00 GiB" in v.messages[0]


def test_a_shape_that_cannot_fit_is_refused_naming_the_bytes_before_the_build():
    problem = fixture_problem("scale")
    instance = ProblemInstance(problem, "cpu")
    shape = problem.spec.shapes[0]
    sizes = shape_sizes(instance, shape)
    assert sizes is not None and sizes.inputs > 0 and sizes.outputs == sizes.inputs and sizes.weights == 0
    with pytest.raises(GateFailed) as failed:
        plan_pools(instance, [shape], free=sizes.need(2) // 2)
    message = failed.value.messages[0]
    assert failed.value.status is Status.internal_error
    assert message.startswith(f"[memory] shape '{shape.name}' cannot be evaluated on this device")
    assert "GB is free" in message
    # with room for it, the pool shrinks to what fits, never below two sets
    roomy = plan_pools(instance, [shape], free=10 * sizes.need(2) + (1 << 31))
    assert roomy[shape.name] >= 2


def test_small_inputs_are_planned_without_running_the_reference(monkeypatch):
    """The meta-device forward costs the first import of torch's decompositions: a shape whose
    inputs are a sliver of the memory is planned from their size alone."""
    problem = fixture_problem("scale")
    instance = ProblemInstance(problem, "cpu")
    shape = problem.spec.shapes[0]

    def forward_not_wanted(*_args):
        raise AssertionError("the reference's forward ran")

    monkeypatch.setattr("rooftop.pipeline.trusted.memory.shape_sizes", forward_not_wanted)
    assert plan_pools(instance, [shape], free=80 << 30)[shape.name] >= 2


def test_shape_sizes_are_measured_once_and_kept_in_the_cache(monkeypatch, tmp_path):
    """The forward that sizes a large shape costs a fresh process most of a second: its figures
    are kept per reference source, spec, shape and torch version, and a damaged entry is measured
    again."""
    from rooftop.pipeline.trusted import memory

    monkeypatch.setenv("ROOFTOP_CACHE", str(tmp_path))
    problem = fixture_problem("scale")
    instance = ProblemInstance(problem, "cpu")
    shape = problem.spec.shapes[0]
    first = memory.cached_shape_sizes(instance, shape)
    assert first is not None and first.inputs > 0
    [entry] = (tmp_path / "sizes").iterdir()

    def forward_not_wanted(*_args):
        raise AssertionError("the reference's forward ran again")

    real_forward = memory.shape_sizes
    monkeypatch.setattr(memory, "shape_sizes", forward_not_wanted)
    assert memory.cached_shape_sizes(instance, shape) == first
    entry.write_text('{"inputs": -1}')
    monkeypatch.setattr(memory, "shape_sizes", real_forward)
    assert memory.cached_shape_sizes(instance, shape) == first
    assert memory.ShapeSizes.model_validate_json(entry.read_text()) == first
    other = problem.spec.shapes[1] if len(problem.spec.shapes) > 1 else shape.model_copy(update={"name": "other"})
    memory.cached_shape_sizes(instance, other)
    assert len(list((tmp_path / "sizes").iterdir())) == 2  # one entry per shape
