"""Is a candidate's output the reference's output? Contract first, then numbers.

Pure functions over tensors: no candidate code runs here, so this module can move to the trusted
side of the process boundary unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rooftop.problem import dtypes
from rooftop.problem.spec import Compare, OutputSpec, ProblemSpec, Tolerance


@dataclass
class Mismatch:
    """Why an output failed, with the numbers a person needs to act on it."""

    output: str
    message: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    norm_rel_error: float | None = None
    tolerance: Tolerance | None = None


def as_outputs(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


def output_spec(spec: ProblemSpec, index: int, count: int) -> tuple[OutputSpec | None, str]:
    """The spec of output `index` (if the problem gives one) and the name messages use for it."""
    out_spec = spec.outputs[index] if index < len(spec.outputs) else None
    return out_spec, out_spec.name if out_spec else (f"output[{index}]" if count > 1 else "output")


def compare_outputs(spec: ProblemSpec, reference: Any, candidate: Any, inputs: list[Any]) -> list[Mismatch]:
    """Every mismatch between the reference's and the candidate's outputs (empty: they agree)."""
    refs, cands = as_outputs(reference), as_outputs(candidate)
    if len(refs) != len(cands):
        return [Mismatch("outputs", f"expected {len(refs)} output(s), got {len(cands)}")]
    problems = []
    for i, (ref, cand) in enumerate(zip(refs, cands)):
        out_spec, name = output_spec(spec, i, len(refs))
        mismatch = _compare_one(spec, out_spec, name, ref, cand, refs, inputs)
        if mismatch:
            problems.append(mismatch)
    return problems


def _compare_one(spec: ProblemSpec, out_spec: OutputSpec | None, name: str, ref: Any, cand: Any,
                 refs: list[Any], inputs: list[Any]) -> Mismatch | None:
    mode = out_spec.compare if out_spec else Compare.close
    if mode is Compare.ignore:
        return None
    if not isinstance(ref, torch.Tensor):  # non-tensor outputs (rare): plain equality
        return None if ref == cand else Mismatch(name, f"expected {ref!r}, got {cand!r}")
    if type(cand) is not torch.Tensor:
        return Mismatch(name, f"expected a torch.Tensor, got {type(cand).__name__}")
    if cand.shape != ref.shape:
        return Mismatch(name, f"shape {tuple(cand.shape)} != expected {tuple(ref.shape)}")
    if cand.dtype != ref.dtype:
        return Mismatch(name, f"dtype {cand.dtype} != expected {ref.dtype}")
    if cand.device != ref.device:
        return Mismatch(name, f"device {cand.device} != expected {ref.device}")
    if mode is Compare.gather:
        # the spec requires a gather rule wherever an output is compared by gathering
        assert out_spec is not None and out_spec.gather is not None
        rule = out_spec.gather
        source = inputs[rule.input]
        try:
            gathered = torch.gather(source, rule.dim, cand.long())
        except (RuntimeError, IndexError) as exc:
            return Mismatch(name, f"indices are out of range for input {rule.input}: {exc}")
        ordered = cand.long().sort(dim=rule.dim).values  # each index names a different element
        repeats = int((ordered.narrow(rule.dim, 1, max(ordered.shape[rule.dim] - 1, 0)) ==
                       ordered.narrow(rule.dim, 0, max(ordered.shape[rule.dim] - 1, 0))).sum()) \
            if cand.dim() and cand.shape[rule.dim] > 1 else 0
        if repeats:
            return Mismatch(name, f"{repeats} indices repeat an earlier one along dim {rule.dim}: each must name a "
                            "different element (a tie is broken by choosing another of the tied elements)")
        return _compare_one(spec, None, f"{name} (values gathered at the indices)",
                            refs[rule.values_output], gathered, refs, inputs)
    tolerance = None if mode is Compare.exact else spec.tolerance_for(dtypes.from_torch(ref.dtype), out_spec)
    if tolerance is None:
        equal = torch.equal(cand, ref) if not ref.is_floating_point() else \
            bool(((cand == ref) | (cand.isnan() & ref.isnan())).all())
        if equal:
            return None
        wrong = int((cand != ref).sum())
        return Mismatch(name, f"{wrong} of {ref.numel()} elements differ (exact comparison)")
    return _compare_close(name, ref, cand, tolerance)


def _compare_close(name: str, ref: torch.Tensor, cand: torch.Tensor, tol: Tolerance) -> Mismatch | None:
    r, c = ref.detach().to(torch.float64), cand.detach().to(torch.float64)
    ref_finite, cand_finite = torch.isfinite(r), torch.isfinite(c)
    bad = (~cand_finite) & ref_finite
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        return Mismatch(name, f"{int(bad.sum())} NaN/Inf value(s) where the reference is finite "
                        f"(first at {index}: {c[index].item()})", tolerance=tol)
    # positions where both are non-finite must agree exactly (inf == inf, nan where nan)
    same_special = (c == r) | (c.isnan() & r.isnan())
    if bool((~ref_finite & ~same_special).any()):
        return Mismatch(name, "NaN/Inf values of the reference are not reproduced", tolerance=tol)
    diff, magnitude, figures = _errors(r, c, ref_finite)
    max_abs, max_rel, norm_rel = figures["max_abs_error"], figures["max_rel_error"], figures["norm_rel_error"]
    excess = diff - (tol.atol + tol.rtol * magnitude)
    numbers = dict(**figures, tolerance=tol)
    over = int((excess > 0).sum())
    if over:
        flat = int(torch.argmax(excess.flatten()))
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), r.shape))
        return Mismatch(name, f"{over} of {r.numel()} elements exceed atol={tol.atol:g} rtol={tol.rtol:g} "
                        f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g}); "
                        f"worst at {index}: got {c[index].item():.6g}, expected {r[index].item():.6g}", **numbers)
    if norm_rel is not None and norm_rel > tol.norm_bound:
        return Mismatch(name, f"normwise relative error {norm_rel:.3g} exceeds {tol.norm_bound:g} "
                        f"(elementwise within atol={tol.atol:g}: the output is too small to judge "
                        "elementwise)", **numbers)
    return None


def error_figures(reference: Any, candidate: Any) -> dict[str, float | None]:
    """Max absolute, max relative and normwise relative error of the first float output (a passing
    check reports them too, to show how close it came to the bound)."""
    ref, cand = as_outputs(reference)[0], as_outputs(candidate)[0]
    if not (isinstance(ref, torch.Tensor) and isinstance(cand, torch.Tensor) and ref.is_floating_point()
            and ref.numel() and cand.shape == ref.shape):
        return {}
    r, c = ref.detach().to(torch.float64), cand.detach().to(torch.float64)
    return _errors(r, c, torch.isfinite(r))[2]


def _errors(r: torch.Tensor, c: torch.Tensor, finite: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Elementwise |c - r| and |r| over the reference's finite entries, and the summary figures."""
    diff = torch.where(finite, (c - r).abs(), 0.0)
    magnitude = torch.where(finite, r.abs(), 0.0)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / magnitude.clamp_min(torch.finfo(torch.float64).tiny)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    ref_norm = float(torch.linalg.vector_norm(magnitude))
    norm_rel = float(torch.linalg.vector_norm(diff)) / ref_norm if ref_norm > 0 else None
    return diff, magnitude, {"max_abs_error": max_abs, "max_rel_error": max_rel, "norm_rel_error": norm_rel}


def storage_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors share any byte of storage."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()
