"""Checks every deck's problems share: the reference run on the CPU, outputs faked for the
degenerate-answer checks, and tensor sizes counted on the meta device."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rooftop.check.compare import as_outputs
from rooftop.problem.figures import distinct_bytes, tensors_in
from rooftop.problem.instance import construct, import_file, init_inputs, make_inputs, set_precision
from rooftop.problem.spec import Problem, Shape
from rooftop.values import clone


def reference_outputs(problem: Problem, shape: Shape, seed: int = 1):
    module = import_file(problem.reference)
    set_precision(problem.spec)
    init = init_inputs(module, problem.spec, shape)
    model = construct(module.Model, init, 7, torch.device("cpu")).eval()
    inputs = make_inputs(module, problem.spec, shape, seed, torch.device("cpu"))
    with torch.no_grad():
        out = model(*clone(inputs))
    return module, model, inputs, out


def meta_bytes(problem: Problem, shape: Shape) -> tuple[int, int]:
    """(bytes of inputs + parameters + buffers + outputs, bytes of the outputs), counted on the meta
    device: nothing is allocated, so the largest shapes cost nothing (but a reference's Python loop
    over time steps still runs, so each count is made once per test session)."""
    return _meta_bytes(problem.reference, shape.name, tuple(sorted(shape.params.items())))


@functools.cache
def _meta_bytes(reference: Path, shape: str, params: tuple[tuple[str, Any], ...]) -> tuple[int, int]:
    module = import_file(reference)
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]), torch.device("meta"), torch.no_grad():
        warnings.simplefilter("ignore")
        model = module.Model(*module.get_init_inputs(**dict(params))).eval()
        inputs = list(module.get_inputs(**dict(params)))
        outputs = model(*inputs)
    held = [*tensors_in(inputs), *model.parameters(), *model.buffers(), *tensors_in(outputs)]
    return distinct_bytes(held), distinct_bytes(tensors_in(outputs))


def fake_outputs(out: Any, fill: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """The reference's output structure with every tensor replaced by `fill(tensor)`."""
    made = [fill(o) if isinstance(o, torch.Tensor) else o for o in as_outputs(out)]
    return made[0] if len(made) == 1 and not isinstance(out, (list, tuple)) else type(out)(made)


