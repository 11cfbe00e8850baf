"""The agent-facing view of a verdict: what a policy may learn from an evaluation.

A verdict is the whole record (the store keeps it); an agent sees less. Its kernel's status, the
messages of a run on shapes it was shown, and per shape the figures it can act on. Of a graded
run (held-out shapes included) it sees the status, the reward and counts and geometric means per
split, never a held-out shape's name, parameters, figures or messages: a candidate can put what
it saw of a held-out input into an error message, so a graded run's messages stay in the store.
A speedup the reward ignores (a shape timed on a shared machine) is shown with that said.
"""

from __future__ import annotations

from pydantic import BaseModel

from rooftop.score.aggregate import geomean
from rooftop.score.reward import unmeasured_note
from rooftop.verdict import ShapeResult, Status, Verdict

MAX_MESSAGE = 4000  # characters of one message an agent is shown


class ShapeView(BaseModel):
    shape: str
    params: dict[str, int | float | bool | str]
    correct: bool | None
    median_us: float | None = None
    reference_median_us: float | None = None
    speedup: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    untrusted: str | None = None  # why its times are not a measurement: the reward ignores them
    message: str = ""


class SplitView(BaseModel):
    """Counts and means over a split's shapes, with no shape named."""

    shapes: int
    correct: int
    geomean_speedup: float | None = None  # over its measured shapes
    unmeasured: int = 0  # shapes whose times the reward ignores


class AgentView(BaseModel):
    status: Status
    reward: float
    graded: bool  # held-out shapes were run: only counts of them are shown
    failed_gate: str | None = None
    messages: list[str] = []
    shapes: list[ShapeView] = []
    splits: dict[str, SplitView] = {}
    geomean_speedup: float | None = None
    # why the reward ignores the speedup ("not measured on 1 of 2 shapes (machine shared)"), no shape named
    speedup_ignored: str | None = None
    unsandboxed: str | None = None  # the candidate ran without a sandbox: said to whoever sees the verdict


def agent_view(verdict: Verdict, reward: float, graded: bool = False) -> AgentView:
    visible = [r for r in verdict.shapes if r.split != "held_out"]
    # a candidate that ran on held-out inputs may echo them in any message, of any shape
    talks = not graded or all(r.split != "held_out" for r in verdict.shapes)
    splits = {}
    for split in dict.fromkeys(r.split for r in verdict.shapes):
        rows = [r for r in verdict.shapes if r.split == split]
        measured = [r for r in rows if r.untrusted is None]
        splits[split] = SplitView(shapes=len(rows), correct=sum(bool(r.correct) for r in rows),
                                  geomean_speedup=_geomean([r.speedup for r in measured]),
                                  unmeasured=len(rows) - len(measured))
    return AgentView(
        status=verdict.status, reward=reward, graded=graded,
        failed_gate=verdict.failed_gate.value if verdict.failed_gate else None,
        messages=[m[:MAX_MESSAGE] for m in verdict.messages] if talks else [],
        shapes=[_shape(r, talks) for r in visible],
        splits=splits if graded else {},
        geomean_speedup=verdict.summary.geomean_speedup,
        speedup_ignored=_ignored(verdict),
        unsandboxed=next((w for w in verdict.warnings if w.startswith("no sandbox")), None)
        if verdict.sandbox == "none" else None,
    )


def _ignored(verdict: Verdict) -> str | None:
    """Why the reward ignores a correct verdict's speedup, naming no shape; None when it uses it."""
    return unmeasured_note(verdict) if verdict.status is Status.correct else None


def _shape(row: ShapeResult, messages: bool) -> ShapeView:
    failed = next((c.message for c in row.checks if not c.ok and c.message), "") if messages else ""
    return ShapeView(shape=row.shape, params=row.params, correct=row.correct,
                     median_us=_us(row.candidate.median if row.candidate else None),
                     reference_median_us=_us(row.reference.median if row.reference else None),
                     speedup=row.speedup, tflops=row.tflops, gbps=row.gbps,
                     roofline_fraction=row.roofline_fraction, untrusted=row.untrusted,
                     message=failed[:MAX_MESSAGE])


def _us(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e6, 3)


def _geomean(values: list[float | None]) -> float | None:
    """Over a split only when every measured shape of it has a speedup: a mean of the ones that
    ran would flatter a kernel that failed the rest."""
    return geomean(values) if all(v is not None for v in values) else None


def render(view: AgentView) -> str:
    """The view as the text of an observation."""
    lines = [f"status: {view.status.value}" + (f" (failed at {view.failed_gate})" if view.failed_gate else ""),
             f"reward: {view.reward:.4g}"]
    if view.unsandboxed:
        lines.append(f"warning: {view.unsandboxed}")
    mean = f"{view.geomean_speedup:.3g}x" if view.geomean_speedup is not None else None
    if view.speedup_ignored:
        lines.append("speedup over the reference (geometric mean): "
                     + (f"{mean} over the measured shapes, " if mean else "")
                     + f"{view.speedup_ignored}; ignored by the reward, which counts it as 0x")
    elif mean:
        lines.append(f"speedup over the reference (geometric mean): {mean}")
    lines += [f"message: {m}" for m in view.messages]
    for s in view.shapes:
        params = ", ".join(f"{k}={v}" for k, v in s.params.items())
        figures = [f"correct={s.correct}"]
        if s.median_us is not None:
            figures.append(f"time={s.median_us:.4g} us")
        if s.speedup is not None or s.untrusted:
            figures.append(f"speedup={s.speedup:.3g}x" if s.speedup is not None else "speedup=-")
            if s.untrusted:
                figures[-1] += f" (not measured: {s.untrusted}; ignored by the reward)"
        if s.roofline_fraction is not None:
            figures.append(f"roofline={100 * s.roofline_fraction:.1f}%")
        lines.append(f"shape {s.shape} ({params}): " + ", ".join(figures) + (f"; {s.message}" if s.message else ""))
    for split, counts in view.splits.items():
        mean = f", speedup {counts.geomean_speedup:.3g}x" if counts.geomean_speedup is not None else ""
        if counts.unmeasured:
            mean = (mean or ", speedup") + f" (not measured on {counts.unmeasured}: ignored by the reward)"
        lines.append(f"{split.replace('_', '-')} shapes: {counts.correct}/{counts.shapes} correct{mean}")
    return "\n".join(lines)
