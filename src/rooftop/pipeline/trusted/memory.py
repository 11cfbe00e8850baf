"""Device memory, planned before any candidate code runs.

Two processes share the GPU: the trusted side (the reference, its inputs, the expected outputs,
the shared memory the candidate's outputs land in) and the child (its inputs, the candidate's
outputs and working memory). For each shape the plan takes the sizes of the inputs, outputs and
weights from a run of the reference on the meta device (nothing allocated, nothing computed) and
the device's free memory, and fixes how many input sets each side's pool keeps: as many as the L2
rule wants (check/inputs.py), fewer when inputs are gigabytes, never fewer than two. A shape that
cannot fit even then is refused, naming the bytes, before the candidate is built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, NonNegativeInt

from rooftop.build.cache import keep, keyed_file
from rooftop.check.inputs import pool_size
from rooftop.problem.instance import ProblemInstance, construct, init_inputs, make_inputs
from rooftop.problem.spec import Shape
from rooftop.values import nbytes
from rooftop.verdict import GateFailed, Status

CHILD_CONTEXT = 1 << 30  # the child's CUDA context, its kernels' modules and the allocators' slack
MARGIN = 0.05  # share of free memory left unplanned (fragmentation, cuBLAS workspaces)
# inputs below this share of the budget are planned from their size alone: the reference's
# meta-device forward, which sizes the outputs, costs the first import of torch's decompositions
# (seconds on a fresh process) and matters only where memory is tight
SMALL_SHARE = 1 / 64


class ShapeSizes(BaseModel):
    """A shape's sizes in bytes (kept in the cache: the meta-device forward that measures them
    costs a fresh process the first import of torch's decompositions, most of a second)."""

    inputs: NonNegativeInt  # one input set
    outputs: NonNegativeInt  # the reference's outputs
    weights: NonNegativeInt  # parameters and buffers of one model

    def fixed(self) -> int:
        """Bytes needed besides the pools (each pool holds the set in flight): on the trusted side
        the expected outputs, their landing (read in place), the reference's temporaries (taken as
        one more output's worth: `x * sigmoid(x)` makes one) and its weights; in the child the
        inputs' snapshot of a checked call, the candidate's outputs and temporaries, and two
        models' weights (the reference's, built to copy from, and the candidate's)."""
        return self.inputs + 5 * self.outputs + 3 * self.weights

    def need(self, sets: int) -> int:
        return self.fixed() + 2 * sets * self.inputs


def _on_meta(instance: ProblemInstance, shape: Shape, forward: bool) -> tuple[list[Any], Any, Any]:
    """The shape's inputs on the meta device (factory calls only: milliseconds) and, when asked,
    the reference model and its outputs there; the caller's random state is left as it was."""
    meta = torch.device("meta")
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        inputs = make_inputs(instance.module, instance.spec, shape, 0, meta)
        if not forward:
            return inputs, None, None
        model = construct(instance.module.Model, init_inputs(instance.module, instance.spec, shape), 0, meta)
        return inputs, model, model(*inputs)


def input_bytes(instance: ProblemInstance, shape: Shape) -> int | None:
    """One input set's bytes; None where the meta device cannot make them."""
    try:
        return nbytes(_on_meta(instance, shape, forward=False)[0])
    except Exception:
        return None


def shape_sizes(instance: ProblemInstance, shape: Shape) -> ShapeSizes | None:
    """Sizes from the reference run on the meta device; None where the meta device cannot run it
    (an op without a meta kernel, a value read back), and the plan then leaves the shape to the
    defaults."""
    try:
        inputs, model, outputs = _on_meta(instance, shape, forward=True)
    except Exception:
        return None
    weights = nbytes([*model.parameters(), *model.buffers()]) if isinstance(model, torch.nn.Module) else 0
    return ShapeSizes(inputs=nbytes(inputs), outputs=nbytes(outputs), weights=weights)


def cached_shape_sizes(instance: ProblemInstance, shape: Shape) -> ShapeSizes | None:
    """`shape_sizes`, measured once per reference source, problem spec, shape and torch version."""
    path = keyed_file("sizes", Path(instance.problem.reference).read_bytes(), json.dumps(
        [instance.spec.model_dump(mode="json"), shape.model_dump(mode="json"), torch.__version__],
        sort_keys=True).encode())
    try:
        return ShapeSizes.model_validate_json(path.read_text())
    except (OSError, ValueError):
        pass
    sizes = shape_sizes(instance, shape)
    if sizes is not None:
        keep(path, sizes.model_dump_json())
    return sizes


def plan_pools(instance: ProblemInstance, shapes: list[Shape], free: int) -> dict[str, int]:
    """Input sets per shape, for both sides; a GateFailed (internal_error) names a shape that cannot fit."""
    budget = int(free * (1 - MARGIN)) - CHILD_CONTEXT
    plan: dict[str, int] = {}
    for shape in shapes:
        small = input_bytes(instance, shape)
        if small is not None and small < SMALL_SHARE * budget:
            plan[shape.name] = pool_size(small)
            continue
        sizes = cached_shape_sizes(instance, shape)
        if sizes is None:
            continue
        if sizes.need(2) > budget:
            raise GateFailed(Status.internal_error, f"[memory] shape '{shape.name}' cannot be evaluated on this "
                             f"device: it needs at least {_gb(sizes.need(2))} of device memory (one input set "
                             f"{_gb(sizes.inputs)}, outputs {_gb(sizes.outputs)}, weights {_gb(sizes.weights)}; two "
                             f"input sets per side, the reference's and the candidate's outputs and working copies), "
                             f"and {_gb(free)} is free")
        wanted = pool_size(sizes.inputs)
        fitting = (budget - sizes.fixed()) // max(2 * sizes.inputs, 1)
        plan[shape.name] = int(max(2, min(wanted, fitting)))
    return plan


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"
