"""Randomized fingerprints of outputs: values at positions drawn after the call returned.

Every timed call's output is checked this way. The child draws the positions from the operating
system's random source only once the call is over, so the candidate cannot know which elements
will be read and compute just those; the trusted side compares the values with its own expected
output under the problem's tolerance.
"""

from __future__ import annotations

import secrets
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict

from rooftop.check.compare import Mismatch, as_outputs, compare_outputs, output_spec
from rooftop.problem import dtypes
from rooftop.problem.spec import Compare, OutputSpec, ProblemSpec

PROBE_SIZE = 64
PROBE_NORM_SLACK = 5.0  # the normwise bound at sampled positions, over the whole output's (see _single_view)


class Probe(BaseModel):
    """What the trusted side learns about one output without copying it whole."""

    model_config = ConfigDict(ser_json_inf_nan="constants")  # NaN and infinities cross as themselves

    type: str  # the Python type's name; anything but "Tensor" fails the output contract
    dtype: str | None = None
    shape: list[int] | None = None
    device: str | None = None
    positions: list[int] = []  # flat indices into the output
    values: list[float] = []  # the output's values there, as float64
    value: Any = None  # a non-tensor output, as JSON


class Gathered:
    """A probe whose values are gathered on the output's device and not read yet: a block's calls
    are probed as each one ends, in stream order, and read once the block is done."""

    def __init__(self, probe: Probe, both: torch.Tensor | None = None) -> None:
        self.probe, self.both = probe, both  # `both`: positions and values, float64, on the device

    def read(self) -> Probe:
        if self.both is None:
            return self.probe
        both = self.both.cpu().tolist()
        self.probe.positions, self.probe.values = [int(p) for p in both[0]], both[1]
        self.both = None
        return self.probe


def gather_output(value: Any, count: int = PROBE_SIZE) -> Gathered:
    """Child side: gather `count` elements at fresh random positions (all of them if fewer),
    without waiting for them."""
    from rooftop.check.landing import dtype_name

    if type(value) is not torch.Tensor:
        if value is None or isinstance(value, (bool, int, float, str)):
            return Gathered(Probe(type=type(value).__name__, value=value))
        return Gathered(Probe(type=type(value).__name__))
    numel = value.numel()
    positions = torch.empty(0, dtype=torch.long, device=value.device)
    if numel:
        if numel <= count:
            positions = torch.arange(numel, device=value.device)
        else:  # drawn where the output lives: no copy to the device before the gather
            positions = torch.randint(numel, (count,), generator=_drawn(value.device), device=value.device)
    flat = torch.Tensor.reshape(value.detach(), -1)
    if flat.is_floating_point() and flat.element_size() == 1:  # fp8: index the bytes (few kernels exist for it)
        picked = flat.view(torch.uint8)[positions].view(value.dtype) if numel else flat[:0]
    else:
        picked = flat[positions] if numel else flat[:0]
    real = picked.abs().double() if picked.is_complex() else picked.to(torch.float64)  # complex: the modulus
    # positions and values come back in one copy (positions below 2**53 are exact in float64)
    both = torch.stack([positions.to(torch.float64), real])
    return Gathered(Probe(type="Tensor", dtype=dtype_name(value.dtype), shape=list(value.shape),
                          device=str(value.device)), both)


def probe_output(value: Any, count: int = PROBE_SIZE) -> Probe:
    """Child side: read `count` elements at fresh random positions (all of them if fewer)."""
    return gather_output(value, count).read()


_GENERATORS: dict[str, torch.Generator] = {}


def _drawn(device: torch.device) -> torch.Generator:
    """The device's generator for probe positions, seeded afresh from the operating system's random
    source at every draw (made once per device: a CUDA generator costs more to make than to seed)."""
    key = str(device)
    if key not in _GENERATORS:
        _GENERATORS[key] = torch.Generator(device=device)
    return _GENERATORS[key].manual_seed(secrets.randbits(63))


def probe_outputs(value: Any, count: int = PROBE_SIZE) -> list[Probe]:
    return [probe_output(v, count) for v in as_outputs(value)]


def gather_outputs(value: Any, count: int = PROBE_SIZE) -> list[Gathered]:
    return [gather_output(v, count) for v in as_outputs(value)]


def check_probes(spec: ProblemSpec, expected: Any, probes: list[Probe]) -> list[Mismatch]:
    """Trusted side: the mismatches between probed outputs and the expected ones."""
    refs = as_outputs(expected)
    if len(probes) != len(refs):
        return [Mismatch("outputs", f"expected {len(refs)} output(s), got {len(probes)}")]
    mismatches = []
    for i, (ref, probe) in enumerate(zip(refs, probes)):
        out_spec, name = output_spec(spec, i, len(refs))
        if out_spec and out_spec.compare in (Compare.ignore, Compare.gather):
            continue  # gathered indices need the whole output and the inputs: checked in full on the correctness calls
        mismatch = _check_one(spec, i, name, ref, probe)
        if mismatch:
            mismatches.append(mismatch)
    return mismatches


def _check_one(spec: ProblemSpec, index: int, name: str, ref: Any, probe: Probe) -> Mismatch | None:
    from rooftop.check.landing import dtype_name

    if not isinstance(ref, torch.Tensor):
        return None if probe.value == ref else Mismatch(name, f"expected {ref!r}, got {probe.value!r}")
    if probe.type != "Tensor":
        return Mismatch(name, f"expected a torch.Tensor, got {probe.type}")
    if probe.shape != list(ref.shape):
        return Mismatch(name, f"shape {tuple(probe.shape or ())} != expected {tuple(ref.shape)}")
    if probe.dtype != dtype_name(ref.dtype):
        return Mismatch(name, f"dtype {probe.dtype} != expected {dtype_name(ref.dtype)}")
    if probe.device != str(ref.device):
        return Mismatch(name, f"device {probe.device} != expected {ref.device}")
    numel = ref.numel()
    if len(probe.positions) != len(probe.values) or (numel and not probe.positions) or \
            not _valid(probe.positions, numel):
        return Mismatch(name, "the probe's positions are not valid for this output")
    if not probe.positions:
        return None
    positions = torch.tensor(probe.positions, dtype=torch.long, device=ref.device)
    sampled_ref = ref.detach().reshape(-1)[positions].cpu()  # one small copy; the comparison runs on the host
    if sampled_ref.is_complex():
        sampled_ref = sampled_ref.abs()
    sampled_ref = sampled_ref.to(torch.float64) if ref.is_floating_point() or ref.is_complex() else sampled_ref
    got = torch.tensor(probe.values, dtype=torch.float64).to(sampled_ref.dtype)
    found = compare_outputs(_single_output(spec, index, dtypes.from_torch(ref.dtype)), sampled_ref, got, [])
    if not found:
        return None
    first = found[0]
    return Mismatch(name, f"{len(probe.positions)} sampled elements: {first.message}", first.max_abs_error,
                    first.max_rel_error, first.norm_rel_error, first.tolerance)


def _valid(positions: list[int], numel: int) -> bool:
    """Whether every position indexes an output of `numel` elements (checked per call: the bounds alone)."""
    return not positions or 0 <= min(positions) <= max(positions) < numel


_SINGLE: dict[tuple[int, int, str], tuple[ProblemSpec, ProblemSpec]] = {}  # (id(spec), index, dtype): (spec, view)


def _single_output(spec: ProblemSpec, index: int, dtype: str) -> ProblemSpec:
    """`_single_view`, made once per spec, output and dtype: every timed call asks again."""
    key = (id(spec), index, dtype)
    held = _SINGLE.get(key)
    if held is None or held[0] is not spec:  # (an id reused by a later spec is made anew)
        if len(_SINGLE) > 256:
            _SINGLE.clear()
        held = _SINGLE[key] = (spec, _single_view(spec, index, dtype))
    return held[1]


def _single_view(spec: ProblemSpec, index: int, dtype: str) -> ProblemSpec:
    """The spec as seen by one output compared on its own at sampled positions: tolerances follow
    the problem's dtype, with the normwise bound widened by PROBE_NORM_SLACK. Over a few dozen
    elements the normwise error is nearly the relative error of the largest value drawn, which an
    honest kernel's rounding takes past the whole output's bound now and then (once in a few
    thousand draws on softmax and SwiGLU outputs); a candidate that answers differently while
    timed (zeros, a stale or partial result) is off by far more."""
    out = spec.outputs[index] if index < len(spec.outputs) else OutputSpec(name=f"output[{index}]")
    tol = spec.tolerance_for(dtype, out)
    if tol is not None:
        out = out.model_copy(update={"tolerance": tol.model_copy(update={"norm": tol.norm_bound * PROBE_NORM_SLACK})})
    return spec.model_copy(update={"outputs": [out]})


def same_inputs(inputs: list[Any], probes: list[Probe]) -> str:
    """Trusted side: '' when the child's inputs agree bit for bit at the probed positions."""
    if len(inputs) != len(probes):
        return f"{len(probes)} inputs instead of {len(inputs)}"
    for i, (x, probe) in enumerate(zip(inputs, probes)):
        if not isinstance(x, torch.Tensor):
            if probe.type == "Tensor" or (probe.value is not None and probe.value != x):
                return f"input {i}"
            continue
        if probe.type != "Tensor" or probe.shape != list(x.shape) or not _valid(probe.positions, x.numel()) or \
                len(probe.positions) != len(probe.values):
            return f"input {i}"
        if probe.positions:
            flat = x.detach().reshape(-1)[torch.tensor(probe.positions, dtype=torch.long, device=x.device)]
            mine = (flat.abs() if flat.is_complex() else flat).to(torch.float64).cpu()
            theirs = torch.tensor(probe.values, dtype=torch.float64)
            if not bool(((mine == theirs) | (mine.isnan() & theirs.isnan())).all()):
                return f"input {i}"
    return ""
