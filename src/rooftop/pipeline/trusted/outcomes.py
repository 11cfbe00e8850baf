"""What each gate found, typed, and the one function that writes it into the verdict.

A gate fills the outcome the runner hands it (one per shape for the gates that go shape by shape)
and never writes the verdict itself: `assemble` does, for a gate that passed and for one that
failed alike, so that a failing gate keeps what it found before it failed (the seeds it checked,
the samples it timed) and the verdict has one writer.
"""

from __future__ import annotations

from pydantic import BaseModel

from rooftop.verdict import Gate, GateRecord, ShapeChecks, ShapeFigures, ShapeTiming, Summary, Verdict


class GateOutcome(BaseModel):
    """One gate's run (or one shape of it): its time, whether a build was reused, what it read
    against, and the warnings it raised."""

    gate: Gate
    shape: str | None = None
    seconds: float | None = None  # as the child measured it (build, load); else the runner's clock
    cached: bool | None = None
    detail: str = ""
    warnings: list[str] = []


class ShapeChecked(GateOutcome, ShapeChecks):
    """The correctness gate on one shape: each seed's comparison, and whether all of them held."""


class ShapeTimed(GateOutcome, ShapeTiming):
    """The timing gate on one shape: both sides' samples and the cross-checks' findings."""


class Scored(GateOutcome):
    """The score gate: each shape's figures and flags (`roofline`, under an estimated floor), and
    the summary over them."""

    figures: dict[str, ShapeFigures] = {}
    flags: dict[str, list[str]] = {}
    summary: Summary | None = None


_SHAPE_GROUPS: dict[type[GateOutcome], type[BaseModel]] = {ShapeChecked: ShapeChecks, ShapeTimed: ShapeTiming}


def assemble(verdict: Verdict, gate: Gate, outcomes: list[GateOutcome], seconds: float,
             failed: str | None = None) -> GateRecord | None:
    """Write one gate's outcomes into the verdict: each shape's findings, the warnings in the
    order they were raised, and the gate's record, which it returns (`seconds`: the gate's wall
    time, for a gate whose child did not time it; `failed`: the failure's first message. A gate
    has one record: a failure attributed to a gate already recorded adds none)."""
    results = {result.shape: result for result in verdict.shapes}
    for outcome in outcomes:
        verdict.warnings.extend(outcome.warnings)
        if isinstance(outcome, Scored):
            _apply_figures(verdict, outcome)
        group = _SHAPE_GROUPS.get(type(outcome))
        if group is not None and outcome.shape in results:
            result = results[outcome.shape]
            for name in group.model_fields:
                value = getattr(outcome, name)
                setattr(result, name, result.flags + value if name == "flags" else value)
    if any(r.gate == gate for r in verdict.gates):
        return None
    measured = [o.seconds for o in outcomes if o.seconds is not None]
    cached = next((o.cached for o in outcomes if o.cached is not None), None)
    detail = failed if failed is not None else next((o.detail for o in outcomes if o.detail), "")
    record = GateRecord(gate=gate, ok=failed is None, seconds=sum(measured) if measured else seconds,
                        cached=cached, detail=detail[:200])
    verdict.gates.append(record)
    return record


def _apply_figures(verdict: Verdict, scored: Scored) -> None:
    for result in verdict.shapes:
        figures = scored.figures.get(result.shape)
        if figures is not None:
            for name in ShapeFigures.model_fields:
                value = getattr(figures, name)
                setattr(result, name, {**result.speedups, **value} if name == "speedups" else value)
        result.flags.extend(f for f in scored.flags.get(result.shape, []) if f not in result.flags)
    if scored.summary is not None:
        verdict.summary = scored.summary
