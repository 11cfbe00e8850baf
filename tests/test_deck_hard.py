"""The hard deck's oracles: each problem is checked the way its peers' were not.

For every problem: the reference agrees with itself through the comparison path; different seeds
give different inputs; zeros, a constant, the identity and the problem's own lazy lower-precision
solution fail; the tolerance that applies is the one the yaml sets; the FLOP formula matches an
independent count of the reference; the held-out shapes are not in the prompt; and on a GPU no
baseline beats the datasheet.
"""

import re

import pytest
import torch
import yaml
from conftest import deck_solutions
from deck_checks import fake_outputs, reference_outputs

from rooftop.check.compare import as_outputs, compare_outputs
from rooftop.problem.instance import make_inputs
from rooftop.problem.registry import bundled_names, resolve
from rooftop.values import clone

NAMES = bundled_names("hard")
pytestmark = pytest.mark.skipif(not NAMES, reason="no hard deck yet")


def _smoke(problem):
    return problem.spec.smoke[0]


def test_the_deck_has_its_seven_problems():
    assert {n.split("/")[1] for n in NAMES} == {"fp8_gemm", "kda_chunk", "paged_decode", "accurate_softmax", "topk",
                                                "moe_up_swiglu", "w4a16_gemm"}


@pytest.mark.parametrize("name", NAMES)
def test_problem_is_complete_and_hides_its_held_out_shapes(name):
    problem = resolve(name)
    spec = problem.spec
    assert 4 <= len(spec.select("visible")) <= 5, "4-5 visible shapes"
    assert 2 <= len(spec.select("held_out")) <= 3, "2-3 held-out shapes"
    assert spec.smoke and spec.bytes and spec.policy.forbidden
    assert problem.sota is not None and problem.prompt is not None
    assert all(s.note for s in spec.select("visible")), "each visible shape says which model it comes from"
    prompt = problem.prompt.read_text()
    visible_values = {v for s in spec.select("visible") + spec.smoke for v in s.params.values()}
    for shape in spec.select("held_out"):
        assert shape.name not in prompt
        for value in shape.params.values():  # a held-out size an agent could hard-code
            if isinstance(value, int) and not isinstance(value, bool) and value >= 10 and value not in visible_values:
                assert not re.search(rf"(?<![\d.]){value}(?![\d.])", prompt), (shape.name, value)


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes_its_own_check_and_seeds_change_the_inputs(name):
    problem = resolve(name)
    shape = _smoke(problem)
    module, model, inputs, out = reference_outputs(problem, shape)
    with torch.no_grad():
        again = model(*clone(inputs))
    assert compare_outputs(problem.spec, out, again, inputs) == []
    other = make_inputs(module, problem.spec, shape, 2, torch.device("cpu"))
    random_inputs = [(a, b) for a, b in zip(inputs, other) if isinstance(a, torch.Tensor) and a.numel() > 1]
    assert random_inputs and any(not torch.equal(a, b) for a, b in random_inputs)
    for a, b in random_inputs:
        if a.is_floating_point() or a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            assert not torch.equal(a.float(), b.float()), "every random float input changes with the seed"


@pytest.mark.parametrize("name", NAMES)
def test_zeros_a_constant_and_the_identity_fail(name):
    problem = resolve(name)
    _, _, inputs, out = reference_outputs(problem, _smoke(problem))
    outs = as_outputs(out)
    assert compare_outputs(problem.spec, out, fake_outputs(out, torch.zeros_like), inputs), "zeros pass"
    assert compare_outputs(problem.spec, out, fake_outputs(out, lambda o: torch.full_like(o, 1)), inputs), \
        "a constant passes"
    first = inputs[0] if isinstance(inputs[0], torch.Tensor) else None
    if first is not None and first.shape == outs[0].shape:
        assert compare_outputs(problem.spec, out, fake_outputs(out, lambda o: first.to(o.dtype)), inputs), \
            "the identity passes"


@pytest.mark.parametrize("name", NAMES)
def test_tolerance_overrides_resolve_to_the_yaml(name):
    problem = resolve(name)
    raw = yaml.safe_load((problem.root / "problem.yaml").read_text())
    for key, value in (raw.get("tolerance") or {}).items():
        expected = value if isinstance(value, dict) else {"atol": value, "rtol": value}
        # the problem's dtype decides, whatever dtype the output tensor has (bf16 out of an fp8 GEMM)
        resolved = problem.spec.tolerance_for("bfloat16")
        assert (resolved.atol, resolved.rtol) == (expected["atol"], expected["rtol"]), (key, resolved)
        assert resolved.norm_bound == expected.get("norm", expected["rtol"])


@pytest.mark.parametrize("name", NAMES)
def test_flops_formula_matches_an_independent_count(name):
    from torch.utils.flop_counter import FlopCounterMode

    problem = resolve(name)
    spec = problem.spec
    if not spec.flops:
        pytest.skip("no flops formula (a selection or data-movement problem)")
    shape = _smoke(problem)
    _, model, inputs, _ = reference_outputs(problem, shape)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(*inputs)
    counted = counter.get_total_flops()
    if counted == 0:
        pytest.skip("the reference does its work in ops the flop counter does not count")
    declared = spec.flops_for(shape)
    assert 0.8 * counted <= declared <= 1.25 * counted, (declared, counted)


@pytest.mark.parametrize("name,path,statuses", list(deck_solutions("hard")), ids=lambda v: getattr(v, "name", None))
def test_lazy_solutions_fail_on_the_cpu(name, path, statuses):
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    # Triton's interpreter takes kda_chunk's recurrent kernel most of a minute on a two-core machine:
    # the limit leaves it room on a slower one
    verdict = evaluate(resolve(name), load_solution(path), Settings(device="cpu", timeout=150, timing=False))
    assert verdict.status.value == statuses["cpu"], verdict.messages


@pytest.mark.gpu
@pytest.mark.parametrize("name,path,statuses", list(deck_solutions("hard")), ids=lambda v: getattr(v, "name", None))
def test_bundled_solutions_get_their_status_on_every_gpu_shape(name, path, statuses):
    """Held-out shapes included: a reference solution must be right where no agent looked."""
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    problem = resolve(name)
    verdict = evaluate(problem, load_solution(path), Settings(device="cuda", shapes="all", timing=False))
    assert verdict.status.value == statuses["cuda"], verdict.messages
    if verdict.status.value == "correct":
        assert {r.shape for r in verdict.shapes if r.correct} == {s.name for s in problem.spec.select("all")}


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_no_baseline_beats_the_datasheet(name):
    from rooftop.measure.baselines import time_baselines
    from rooftop.measure.stopping import TimingPolicy
    from rooftop.score.hardware import lookup
    from rooftop.score.roofline import roofline_fraction

    problem = resolve(name)
    spec = problem.spec
    gpu = lookup(torch.cuda.get_device_name())
    policy = TimingPolicy(min_seconds=0.2, max_seconds=1.0, max_samples=100)
    records = time_baselines(problem, spec.select("all"), "cuda", policy=policy)
    for record in records:
        if record.stats is None:
            continue
        shape = next(s for s in spec.all_shapes() if s.name == record.shape)
        fraction = roofline_fraction(gpu, spec.peak_dtype or spec.dtype, spec.flops_for(shape),
                                     spec.bytes_for(shape), record.stats.median)
        assert fraction is None or fraction <= 1.0, (record.shape, record.kind, fraction)
