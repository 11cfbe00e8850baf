"""Is a candidate's output the reference's output? Contract first, then numbers.

Pure functions over tensors: no candidate code runs here, so this module can move to the trusted
side of the process boundary unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy
import torch

from rooftop.check import fused
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


def compare_outputs(spec: ProblemSpec, reference: Any, candidate: Any, inputs: list[Any],
                    figures: dict[str, float | None] | None = None) -> list[Mismatch]:
    """Every mismatch between the reference's and the candidate's outputs (empty: they agree).
    `figures`, when given, receives the first output's error figures when the comparison measured
    them (a passing check reports them without a second pass over a gigabyte output)."""
    refs, cands = as_outputs(reference), as_outputs(candidate)
    if len(refs) != len(cands):
        return [Mismatch("outputs", f"expected {len(refs)} output(s), got {len(cands)}")]
    problems = []
    for i, (ref, cand) in enumerate(zip(refs, cands)):
        out_spec, name = output_spec(spec, i, len(refs))
        mismatch = _compare_one(spec, out_spec, name, ref, cand, refs, inputs, figures if i == 0 else None)
        if mismatch:
            problems.append(mismatch)
    return problems


def _compare_one(spec: ProblemSpec, out_spec: OutputSpec | None, name: str, ref: Any, cand: Any,
                 refs: list[Any], inputs: list[Any], figures: dict | None = None) -> Mismatch | None:
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
    return _compare_close(name, ref, cand, tolerance, figures)


# elements compared at a time: float64 copies of one chunk of each side, a few hundred MB at most,
# so a multi-gigabyte output is judged without a multiple of its size in temporaries
CHUNK = 1 << 24


@dataclass
class _Errors:
    """The error figures of a comparison, accumulated chunk by chunk over the flattened outputs."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    diff_sq: float = 0.0
    ref_sq: float = 0.0
    over: int = 0
    worst_excess: float = float("-inf")
    worst: int = -1  # flat index of the largest excess over the tolerance
    nonfinite: int = 0  # candidate NaN/Inf where the reference is finite
    first_nonfinite: int = -1
    special_wrong: bool = False  # the reference's NaN/Inf not reproduced

    def figures(self) -> dict[str, float | None]:
        ref_norm = self.ref_sq ** 0.5
        return {"max_abs_error": self.max_abs, "max_rel_error": self.max_rel,
                "norm_rel_error": self.diff_sq ** 0.5 / ref_norm if ref_norm > 0 else None}


def _chunks(ref: torch.Tensor, cand: torch.Tensor) -> Any:
    """(offset, reference chunk, candidate chunk) in float64 over the flattened tensors."""
    r, c = ref.detach().reshape(-1), cand.detach().reshape(-1)
    for start in range(0, r.numel(), CHUNK):
        yield start, r[start:start + CHUNK].to(torch.float64), c[start:start + CHUNK].to(torch.float64)


def _measure(ref: torch.Tensor, cand: torch.Tensor, tol: Tolerance | None) -> _Errors:
    """All figures in one pass, accumulated on the tensors' device and read back once: a read per
    figure per chunk would stall the GPU hundreds of times over a gigabyte output."""
    tiny = torch.finfo(torch.float64).tiny
    # running totals on the device: nonfinite count, first nonfinite index, max abs, max rel,
    # sum of squared differences, sum of squared reference values, count over, worst excess, its index
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    nonfinite, over = zero.clone(), zero.clone()
    first_nonfinite, worst = zero - 1, zero - 1
    max_abs, max_rel, diff_sq, ref_sq = zero.clone(), zero.clone(), zero.clone(), zero.clone()
    worst_excess = zero - float("inf")
    special_wrong = torch.zeros((), dtype=torch.bool, device=ref.device)
    for start, r, c in _chunks(ref, cand):
        finite = torch.isfinite(r)
        bad = (~torch.isfinite(c)) & finite
        first = torch.where(bad.any(), start + torch.argmax(bad.to(torch.uint8)).to(torch.float64), zero - 1)
        first_nonfinite = torch.where(first_nonfinite < 0, first, first_nonfinite)
        nonfinite += bad.sum()
        same_special = (c == r) | (c.isnan() & r.isnan())
        special_wrong |= (~finite & ~same_special).any()
        diff = torch.where(finite, (c - r).abs(), 0.0)
        magnitude = torch.where(finite, r.abs(), 0.0)
        if diff.numel():
            max_abs = torch.maximum(max_abs, diff.max())
            max_rel = torch.maximum(max_rel, (diff / magnitude.clamp_min(tiny)).max())
        diff_sq += diff.square().sum()
        ref_sq += magnitude.square().sum()
        if tol is not None and diff.numel():
            excess = diff - (tol.atol + tol.rtol * magnitude)
            over += (excess > 0).sum()
            at = torch.argmax(excess)
            larger = excess[at] > worst_excess
            worst_excess = torch.where(larger, excess[at], worst_excess)
            worst = torch.where(larger, start + at.to(torch.float64), worst)
    read = torch.stack([nonfinite, first_nonfinite, max_abs, max_rel, diff_sq, ref_sq, over, worst_excess, worst,
                        special_wrong.to(torch.float64)]).tolist()
    return _Errors(max_abs=read[2], max_rel=read[3], diff_sq=read[4], ref_sq=read[5], over=int(read[6]),
                   worst_excess=read[7], worst=int(read[8]), nonfinite=int(read[0]),
                   first_nonfinite=int(read[1]), special_wrong=bool(read[9]))


# the screening pass computes in float32 (a quarter of float64's traffic over a gigabyte output);
# its rounding is below 1e-7 of each element's figures, so it may only settle what no rounding could
# change: every element below (1 - SCREEN_MARGIN) of its bound and the norm below (1 - NORM_MARGIN)
# of its bound. Anything nearer, non-finite or failing is judged again by the float64 pass.
SCREEN_MARGIN = 1e-5
_SCREENED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SCREEN_NORMS = (1e-20, 1e30)  # squared reference norms that float32 sums hold without underflow or overflow
SMALL = 1 << 16  # elements up to which a host output is screened through numpy (`_screen_small`)
NORM_MARGIN = 1e-4  # a float32 sum of squares is good to a few 1e-6 of itself (tree reductions)


def _screen(ref: torch.Tensor, cand: torch.Tensor, tol: Tolerance | None) -> _Errors | None:
    """The figures of a comparison that passes with room to spare, in one lean pass; None when the
    float64 pass must decide (an element or the norm near its bound, a NaN or Inf, a failure)."""
    if ref.dtype not in _SCREENED or cand.dtype != ref.dtype:
        return None
    if fused.wanted(ref, cand):
        max_abs, max_rel, diff_sq, ref_sq, near, unfinite = fused.screen(
            ref, cand, tol.atol if tol else 0.0, tol.rtol if tol else 0.0, 1 - SCREEN_MARGIN)
        read = [max_abs if not unfinite else math.nan, max_rel, diff_sq, ref_sq, near if tol else 0]
    elif ref.device.type == "cpu" and ref.numel() <= SMALL:
        read = _screen_small(ref, cand, tol)
    else:
        read = _screen_passes(ref, cand, tol)
    if not math.isfinite(read[0]) or read[4] > 0 or not (SCREEN_NORMS[0] < read[3] < SCREEN_NORMS[1]) \
            or not math.isfinite(read[2]):
        return None  # a NaN or Inf, an element near its bound, or norms whose squares a float32 sum may lose
    errors = _Errors(max_abs=read[0], max_rel=read[1], diff_sq=read[2], ref_sq=read[3])
    norm_rel = errors.figures()["norm_rel_error"]
    if tol is not None and norm_rel is not None and norm_rel > tol.norm_bound * (1 - NORM_MARGIN):
        return None
    return errors


def _screen_small(ref: torch.Tensor, cand: torch.Tensor, tol: Tolerance | None) -> list[float]:
    """The screen's figures for a small output on the host (every timed call's probes: a few dozen
    values), in float64 through numpy: a dozen torch operations cost each call more than the
    comparison itself."""
    r = ref.detach().reshape(-1).to(torch.float64).numpy()
    c = cand.detach().reshape(-1).to(torch.float64).numpy()
    if not r.size:
        return [0.0, 0.0, 0.0, 0.0, 0]
    with numpy.errstate(invalid="ignore", over="ignore"):
        diff = numpy.abs(c - r)
        magnitude = numpy.abs(r)
        max_abs = float(diff.max())  # a NaN or Inf stays in it
        near = int((diff > (tol.atol + tol.rtol * magnitude) * (1 - SCREEN_MARGIN)).sum()) if tol is not None else 0
        max_rel = float((diff / numpy.maximum(magnitude, numpy.finfo(numpy.float64).tiny)).max())
        return [max_abs, max_rel, float(diff @ diff), float(magnitude @ magnitude), near]


def _screen_passes(ref: torch.Tensor, cand: torch.Tensor, tol: Tolerance | None) -> list[float]:
    """The screen's figures with torch ops, chunk by chunk: max abs (NaN when any difference is
    not finite), max rel, the two sums of squares and the count of elements near their bound."""
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    tiny = torch.finfo(work).tiny
    r_all, c_all = ref.detach().reshape(-1), cand.detach().reshape(-1)
    zero = torch.zeros((), dtype=torch.float64, device=ref.device)
    max_abs, max_rel, diff_sq, ref_sq, near = zero.clone(), zero.clone(), zero.clone(), zero.clone(), zero.clone()
    for start in range(0, r_all.numel(), CHUNK):
        r, c = r_all[start:start + CHUNK].to(work), c_all[start:start + CHUNK].to(work)
        diff = torch.sub(c, r).abs_()
        magnitude = r.abs()
        max_abs = torch.maximum(max_abs, diff.amax().to(torch.float64))  # a NaN or Inf stays in it
        diff_sq += torch.linalg.vector_norm(diff).to(torch.float64).square()
        ref_sq += torch.linalg.vector_norm(magnitude).to(torch.float64).square()
        if tol is not None:
            bound = magnitude.mul(tol.rtol).add_(tol.atol).mul_(1 - SCREEN_MARGIN)
            near += torch.gt(diff, bound).sum()
        max_rel = torch.maximum(max_rel, diff.div_(magnitude.clamp_min_(tiny)).amax().to(torch.float64))
    return torch.stack([max_abs, max_rel, diff_sq, ref_sq, near]).tolist()


def _compare_close(name: str, ref: torch.Tensor, cand: torch.Tensor, tol: Tolerance,
                   figures: dict | None = None) -> Mismatch | None:
    screened = _screen(ref, cand, tol)
    if screened is not None:
        if figures is not None:
            figures.update(screened.figures())
        return None
    err = _measure(ref, cand, tol)
    if figures is not None:
        figures.update(err.figures())
    if err.nonfinite:
        index = _unravel(err.first_nonfinite, ref.shape)
        return Mismatch(name, f"{err.nonfinite} NaN/Inf value(s) where the reference is finite "
                        f"(first at {index}: {cand[index].item()})", tolerance=tol)
    if err.special_wrong:
        return Mismatch(name, "NaN/Inf values of the reference are not reproduced", tolerance=tol)
    figures = err.figures()
    max_abs, max_rel, norm_rel = figures["max_abs_error"], figures["max_rel_error"], figures["norm_rel_error"]
    numbers: dict[str, Any] = dict(**figures, tolerance=tol)
    if err.over:
        index = _unravel(err.worst, ref.shape)
        return Mismatch(name, f"{err.over} of {ref.numel()} elements exceed atol={tol.atol:g} rtol={tol.rtol:g} "
                        f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g}); "
                        f"worst at {index}: got {float(cand[index]):.6g}, expected {float(ref[index]):.6g}", **numbers)
    if norm_rel is not None and norm_rel > tol.norm_bound:
        return Mismatch(name, f"normwise relative error {norm_rel:.3g} exceeds {tol.norm_bound:g} "
                        f"(elementwise within atol={tol.atol:g}: the output is too small to judge "
                        "elementwise)", **numbers)
    return None


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape))


def error_figures(reference: Any, candidate: Any) -> dict[str, float | None]:
    """Max absolute, max relative and normwise relative error of the first float output (a passing
    check reports them too, to show how close it came to the bound)."""
    ref, cand = as_outputs(reference)[0], as_outputs(candidate)[0]
    if not (isinstance(ref, torch.Tensor) and isinstance(cand, torch.Tensor) and ref.is_floating_point()
            and ref.numel() and cand.shape == ref.shape):
        return {}
    return (_screen(ref, cand, None) or _measure(ref, cand, None)).figures()


def fingerprint(value: Any) -> Any:
    """A digest of a value's exact bits (tensors: shape, dtype and two weighted sums over their
    words, chunk by chunk, added up on the device), to tell whether an output repeats an earlier
    one without keeping it."""
    if isinstance(value, (list, tuple)):
        return tuple(fingerprint(v) for v in value)
    if not isinstance(value, torch.Tensor):
        return ("value", repr(value)[:200])
    raw = value.detach().contiguous().reshape(-1)
    if raw.numel():
        raw = raw.view(torch.uint8)
        if raw.numel() % 4 == 0 and raw.storage_offset() % 4 == 0:
            raw = raw.view(torch.int32)  # words: a quarter of the elements to add up
    if raw.dtype == torch.int32 and fused.wanted(raw):
        return (tuple(value.shape), str(value.dtype), fused.digest(raw, CHUNK))
    sums = torch.zeros(2, dtype=torch.int64, device=raw.device)
    weights = (torch.arange(1, min(CHUNK, raw.numel()) + 1, device=raw.device) % 65521).to(torch.int32)
    for start in range(0, raw.numel(), CHUNK):
        part = raw[start:start + CHUNK].to(torch.int32)  # (words already are: no copy)
        sums[0] += part.sum(dtype=torch.int64)
        # products in the words' own width wrap around: still a digest, at a third of the traffic
        sums[1] += (part * weights[:part.numel()]).sum(dtype=torch.int64)
    return (tuple(value.shape), str(value.dtype), tuple(sums.tolist()))


def storage_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors share any byte of storage."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()
