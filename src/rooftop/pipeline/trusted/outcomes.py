"""What each gate found, typed, and the one function that writes it into the verdict.

A gate fills the outcome the runner hands it (one per shape for the gates that go shape by shape)
and never writes the verdict itself: `assemble` does, for a gate that passed and for one that
failed alike, so that a failing gate keeps what it found before it failed (the seeds it checked,
the samples it timed) and the verdict has one writer.
"""

from __future__ import annotations

from pydantic import BaseModel

from rooftop.measure.measurement import TimingStats
from rooftop.verdict import Gate, GateRecord, SeedCheck, Summary, Verdict


class GateOutcome(BaseModel):
    """One gate's run (or one shape of it): its time, whether a build was reused, what it read
    against, and the warnings it raised."""

    gate: Gate
    shape: str | None = None
    seconds: float | None = None  # as the child measured it (build, load); else the runner's clock
    cached: bool | None = None
    detail: str = ""
    warnings: list[str] = []


class ShapeChecked(GateOutcome):
    """The correctness gate on one shape: each seed's comparison, and whether all of them held."""

    correct: bool | None = None
    checks: list[SeedCheck] = []


class ShapeTimed(GateOutcome):
    """The timing gate on one shape: both sides' samples and the cross-checks' findings."""

    candidate: TimingStats | None = None
    reference: TimingStats | None = None
    timed_calls: int = 0
    timed_checks: int = 0
    kernel_share: float | None = None
    profiled_kernel_seconds: float | None = None
    profiled_event_seconds: float | None = None
    untimed_seconds: float | None = None
    harness_seconds: float | None = None
    queue_seconds: dict[str, float] = {}
    flags: list[str] = []


class ShapeFigures(BaseModel):
    """The score gate's figures for one shape, from its samples and the problem's flops and bytes."""

    flops: float | None = None
    bytes: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    speedup_spread: float | None = None
    spread_source: str = ""
    speedups: dict[str, float] = {}
    flags: list[str] = []


class Scored(GateOutcome):
    """The score gate: each shape's figures, and the summary over them."""

    figures: dict[str, ShapeFigures] = {}
    summary: Summary | None = None


_SHAPE_FIELDS = {ShapeChecked: ("correct", "checks"),
                 ShapeTimed: tuple(f for f in ShapeTimed.model_fields if f not in GateOutcome.model_fields)}


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
        fields = _SHAPE_FIELDS.get(type(outcome), ())
        if fields and outcome.shape in results:
            result = results[outcome.shape]
            for name in fields:
                value = getattr(outcome, name)
                setattr(result, name, list(result.flags) + value if name == "flags" else value)
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
        if figures is None:
            continue
        for name in ShapeFigures.model_fields:
            if name == "flags":
                result.flags.extend(f for f in figures.flags if f not in result.flags)
            elif name == "speedups":
                result.speedups.update(figures.speedups)
            else:
                setattr(result, name, getattr(figures, name))
    if scored.summary is not None:
        verdict.summary = scored.summary
