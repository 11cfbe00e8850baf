"""The core deck's oracles, checked the way KernelBench's users wished its problems were.

For every problem, on the CPU: levels and tags agree; several visible and held-out shapes; the
reference agrees with itself and seeds change every random input; zeros, a constant and the
identity fail; the flops formula matches an independent count and the bytes formula the bytes the
reference's inputs, parameters and outputs really hold; every shape's tensors fit a 24 GB card with
room for the reference's intermediates; the largest visible shape cannot run under 50 µs on an
H100 even at the roof, so launch overhead never decides. On a GPU: the reference's peak memory
fits 24 GB and its eager time on the largest visible shape is at least 50 µs.
"""

from __future__ import annotations

import re

import pytest
import torch
from deck_checks import fake_outputs, meta_bytes, reference_outputs

from rooftop.check.compare import as_outputs, compare_outputs
from rooftop.problem.instance import construct, import_file, init_inputs, make_inputs, set_precision
from rooftop.problem.registry import bundled_names, resolve
from rooftop.score.hardware import datasheet
from rooftop.score.roofline import floor_seconds
from rooftop.values import clone

NAMES = bundled_names("core")
pytestmark = pytest.mark.skipif(not NAMES, reason="no core deck yet")

H100 = next(g for g in datasheet() if g.key == "h100_sxm")
MIN_ROOF_SECONDS = 50e-6  # the largest visible shape, at the roof of an H100 SXM
TENSOR_BUDGET = 12 * 2**30  # inputs + parameters + outputs; the rest of 24 GB is the reference's scratch
CARD = 24 * 2**30


def test_the_deck_has_three_levels_and_at_least_forty_problems():
    levels = {n.split("/")[1] for n in NAMES}
    assert levels == {"level1", "level2", "level3"}
    assert len(NAMES) >= 40
    for level in levels:
        assert sum(n.split("/")[1] == level for n in NAMES) >= 6, level


@pytest.mark.parametrize("name", NAMES)
def test_problem_is_complete_and_hides_its_held_out_shapes(name):
    problem = resolve(name)
    spec = problem.spec
    level = name.split("/")[1]
    assert level in spec.tags, f"tags must name the level ({level})"
    assert len(spec.select("visible")) >= 3, "at least 3 visible shapes"
    assert len(spec.select("held_out")) >= 2, "at least 2 held-out shapes"
    assert spec.smoke and spec.bytes, "smoke shapes and a bytes formula"
    assert spec.policy.forbidden or not spec.policy.allow_torch_ops, "a policy that forbids the op being replaced"
    assert all(s.note for s in spec.shapes), "each shape says where it comes from or what it stresses"
    if problem.prompt is not None:
        prompt = problem.prompt.read_text()
        visible_values = {v for s in spec.select("visible") + spec.smoke for v in s.params.values()}
        for shape in spec.select("held_out"):
            assert shape.name not in prompt
            for value in shape.params.values():
                distinctive = isinstance(value, int) and not isinstance(value, bool) and value >= 10
                if distinctive and value not in visible_values:
                    assert not re.search(rf"(?<![\d.]){value}(?![\d.])", prompt), (shape.name, value)


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes_its_own_check_and_seeds_change_the_inputs(name):
    problem = resolve(name)
    for shape in problem.spec.smoke:
        module, model, inputs, out = reference_outputs(problem, shape)
        assert not any(m.training for m in model.modules()), "the reference runs in eval mode"
        with torch.no_grad():
            again = model(*clone(inputs))
        assert compare_outputs(problem.spec, out, again, inputs) == [], "the reference is deterministic"
        other = make_inputs(module, problem.spec, shape, 2, torch.device("cpu"))
        floats = [(a, b) for a, b in zip(inputs, other)
                  if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel() > 1]
        for a, b in floats:
            assert not torch.equal(a, b), "every random float input changes with the seed"
            assert a.float().std() > 0, "no constant inputs"
        for o in as_outputs(out):
            if isinstance(o, torch.Tensor) and o.is_floating_point():
                assert torch.isfinite(o).all(), "finite outputs"
                if o.numel() > 1:
                    assert o.float().std() > 0, "the output is not a constant"


@pytest.mark.parametrize("name", NAMES)
def test_zeros_a_constant_and_the_identity_fail(name):
    problem = resolve(name)
    for shape in problem.spec.smoke:
        _, _, inputs, out = reference_outputs(problem, shape)
        outs = as_outputs(out)
        assert compare_outputs(problem.spec, out, fake_outputs(out, torch.zeros_like), inputs), "zeros pass"
        assert compare_outputs(problem.spec, out, fake_outputs(out, lambda o: torch.full_like(o, 1)), inputs), \
            "a constant passes"
        first = inputs[0] if isinstance(inputs[0], torch.Tensor) else None
        if first is not None and first.shape == outs[0].shape:
            assert compare_outputs(problem.spec, out, fake_outputs(out, lambda o, x=first: x.to(o.dtype)), inputs), \
                "the identity passes"


@pytest.mark.parametrize("name", NAMES)
def test_flops_formula_matches_an_independent_count(name):
    from torch.utils.flop_counter import FlopCounterMode

    problem = resolve(name)
    spec = problem.spec
    if not spec.flops:
        pytest.skip("no flops formula (a data-movement problem)")
    shape = spec.smoke[0]
    _, model, inputs, _ = reference_outputs(problem, shape)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(*inputs)
    counted = counter.get_total_flops()
    declared = spec.flops_for(shape)
    if counted == 0 or counted < 0.5 * declared and "counter-partial" in spec.tags:
        return  # the work is in ops the counter does not know (elementwise, reductions, scans)
    assert 0.8 * counted <= declared <= 1.25 * counted + 1e-9, (declared, counted)


@pytest.mark.parametrize("name", NAMES)
def test_bytes_formula_counts_what_the_reference_holds(name):
    problem = resolve(name)
    spec = problem.spec
    for shape in spec.select("all"):
        held, _ = meta_bytes(problem, shape)
        declared = spec.bytes_for(shape)
        assert 0.8 * held <= declared <= 1.25 * held, (shape.name, declared, held)


@pytest.mark.parametrize("name", NAMES)
def test_every_shape_fits_a_24_gb_card_and_the_largest_visible_is_not_launch_bound(name):
    problem = resolve(name)
    spec = problem.spec
    for shape in spec.select("all"):
        held, _ = meta_bytes(problem, shape)
        assert held <= TENSOR_BUDGET, (shape.name, f"{held / 2**30:.1f} GiB of tensors")
    roofs = [floor_seconds(H100, spec.peak_dtype or spec.dtype, spec.flops_for(s), spec.bytes_for(s)) or 0.0
             for s in spec.select("visible")]
    assert max(roofs) >= MIN_ROOF_SECONDS, f"largest visible shape: {max(roofs) * 1e6:.1f} µs at the H100's roof"


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_reference_fits_a_24_gb_card_and_runs_50_us_on_the_gpu(name):
    from rooftop.measure.baselines import time_baselines
    from rooftop.measure.stopping import TimingPolicy

    problem = resolve(name)
    spec = problem.spec
    for shape in spec.select("all"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        module = import_file(problem.reference)
        set_precision(spec)
        init = init_inputs(module, spec, shape)
        model = construct(module.Model, init, 7, torch.device("cuda")).eval()
        inputs = make_inputs(module, spec, shape, 1, torch.device("cuda"))
        with torch.no_grad():
            model(*inputs)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        del model, inputs
        assert peak <= CARD, (shape.name, f"{peak / 2**30:.1f} GiB")
    largest = max(spec.select("visible"), key=lambda s: spec.bytes_for(s) + (spec.flops_for(s) or 0))
    policy = TimingPolicy(min_seconds=0.1, max_seconds=0.5, max_samples=50)
    records = time_baselines(problem, [largest], "cuda", policy=policy, kinds=("eager",))
    assert records[0].stats.median >= MIN_ROOF_SECONDS, (largest.name, records[0].stats.median)
