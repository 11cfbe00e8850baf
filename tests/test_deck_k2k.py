"""The kernel-to-kernel tasks: each starts from a correct but slow kernel in Triton or CUDA C++, and
its solution must stay in that language, compute with its own kernels, and beat the starter.

On the CPU: the spec says so (starter baseline, language, no torch compute), the starter passes the
static gate and is correct on the smoke shapes (Triton through the interpreter; CUDA sources are
built only on a GPU), the lazy torch fallbacks are rejected, the oracle refuses degenerate answers,
and the largest visible shape cannot run under 50 µs at an H100's roof. On a GPU: every starter is
correct on every shape, held-out included, and the starter baseline is timed.
"""

from __future__ import annotations

import re

import pytest
import torch
from conftest import deck_solutions
from deck_checks import fake_outputs, meta_bytes, reference_outputs

from rooftop.check.compare import as_outputs, compare_outputs
from rooftop.pipeline.trusted.static import check_solution_files
from rooftop.problem.registry import bundled_names, resolve
from rooftop.score.hardware import datasheet
from rooftop.score.roofline import floor_seconds
from rooftop.solution.loader import load_solution

NAMES = bundled_names("k2k")
pytestmark = pytest.mark.skipif(not NAMES, reason="no k2k deck yet")
H100 = next(g for g in datasheet() if g.key == "h100_sxm")


def _language(name: str) -> str:
    return resolve(name).spec.policy.language or ""


def test_the_deck_has_six_triton_and_four_cuda_tasks():
    languages = [_language(n) for n in NAMES]
    assert languages.count("triton") >= 6 and languages.count("cuda") >= 4, languages


@pytest.mark.parametrize("name", NAMES)
def test_task_is_complete_and_keeps_to_its_language(name):
    problem = resolve(name)
    spec = problem.spec
    assert spec.baseline == "starter" and problem.starter is not None
    assert spec.policy.language in ("triton", "cuda") and not spec.policy.allow_torch_ops
    assert {"k2k", spec.policy.language} <= set(spec.tags)
    assert len(spec.select("visible")) >= 3 and len(spec.select("held_out")) >= 2 and spec.smoke and spec.bytes
    assert all(s.note for s in spec.shapes)
    check_solution_files(load_solution(problem.starter), spec.policy)  # raises GateFailed when the starter breaks it
    if problem.prompt is not None:
        prompt = problem.prompt.read_text()
        visible = {v for s in spec.select("visible") + spec.smoke for v in s.params.values()}
        for shape in spec.select("held_out"):
            assert shape.name not in prompt
            for value in shape.params.values():
                distinctive = isinstance(value, int) and not isinstance(value, bool) and value >= 10
                if distinctive and value not in visible:
                    assert not re.search(rf"(?<![\d.]){value}(?![\d.])", prompt), (shape.name, value)


@pytest.mark.parametrize("name", NAMES)
def test_degenerate_answers_fail_and_sizes_are_honest(name):
    problem = resolve(name)
    spec = problem.spec
    for shape in spec.smoke:
        _, _, inputs, out = reference_outputs(problem, shape)
        assert compare_outputs(spec, out, fake_outputs(out, torch.zeros_like), inputs), "zeros pass"
        assert compare_outputs(spec, out, fake_outputs(out, lambda o: torch.full_like(o, 1)), inputs), "a constant"
        first = inputs[0] if isinstance(inputs[0], torch.Tensor) else None
        outs = as_outputs(out)
        if first is not None and first.shape == outs[0].shape and first.dtype == outs[0].dtype:
            assert compare_outputs(spec, out, fake_outputs(out, lambda o, x=first: x.clone()), inputs), "identity"
    for shape in spec.select("all"):
        held, _ = meta_bytes(problem, shape)
        assert held <= 12 * 2**30, shape.name
        assert 0.8 * held <= spec.bytes_for(shape) <= 1.25 * held, (shape.name, spec.bytes_for(shape), held)
    roofs = [floor_seconds(H100, spec.peak_dtype or spec.dtype, spec.flops_for(s), spec.bytes_for(s)) or 0.0
             for s in spec.select("visible")]
    assert max(roofs) >= 50e-6, f"{max(roofs) * 1e6:.1f} µs at the roof"


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if _language(n) == "triton"])
def test_triton_starter_is_correct_on_the_cpu(name):
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.vocabulary import Settings

    problem = resolve(name)
    verdict = evaluate(problem, load_solution(problem.starter), Settings(device="cpu", timeout=120, timing=False))
    assert verdict.status.value == "correct", verdict.messages


@pytest.mark.parametrize("name,path,statuses", list(deck_solutions("k2k")), ids=lambda v: getattr(v, "name", None))
def test_lazy_solutions_are_refused(name, path, statuses):
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.vocabulary import Settings

    verdict = evaluate(resolve(name), load_solution(path), Settings(device="cpu", timeout=120, timing=False))
    assert verdict.status.value == statuses["cpu"], verdict.messages


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_starter_is_correct_on_every_gpu_shape_and_timed_as_the_baseline(name):
    from rooftop.measure.baselines import time_baselines
    from rooftop.measure.stopping import TimingPolicy
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.vocabulary import Settings

    problem = resolve(name)
    verdict = evaluate(problem, load_solution(problem.starter), Settings(device="cuda", shapes="all", timing=False))
    assert verdict.status.value == "correct", verdict.messages
    assert {r.shape for r in verdict.shapes if r.correct} == {s.name for s in problem.spec.select("all")}
    largest = max(problem.spec.select("visible"), key=lambda s: problem.spec.bytes_for(s))
    policy = TimingPolicy(min_seconds=0.1, max_seconds=0.5, max_samples=50)
    [record] = time_baselines(problem, [largest], "cuda", kinds=("starter",), policy=policy)
    assert record.stats is not None, record.error
