"""The leaderboard document: rows (agent x model, or groups of solutions) by problems, each cell the
figures of its repeats, and reference rows for eager, torch.compile and SOTA.

A cell's roofline is a mean over every repeat, a failed one counting 0, so that an agent correct
once in three does not rank with one correct three times; speedups are geometric means over the
correct repeats alone, since a failed solution has no speed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from rooftop.problem.formats.kernelbench import natural_key
from rooftop.report.annotations import MARKS, Annotation
from rooftop.report.collect import Entry, deck_of, display_names
from rooftop.report.references import ProblemFacts, ReferenceCell, kind_key, reference_cells
from rooftop.report.stats import METHOD, Interval, mean_interval
from rooftop.score.aggregate import geomean

SCHEMA_VERSION = 1
FAST_P = (0.0, 1.0, 1.5, 2.0)  # the thresholds the document carries; the plot draws the whole curve
ROOFLINE_RULE = ("the graded verdict's geometric-mean roofline fraction over its shapes; a repeat whose graded "
                 "solution is not correct counts 0 (where the device has a roofline at all)")


class Attempt(BaseModel):
    """One repeat in a cell: an agent run, or an evaluation."""

    run_id: str | None = None
    evaluation_id: int | None = None
    solution: str | None = None
    status: str
    roofline: float | None = None  # as the cell counts it
    speedup: float | None = None
    held_out: str = "-"  # correct/held-out shapes
    notes: list[str] = []  # the audit verdicts of its annotations


class Cell(BaseModel):
    runs: int = 0
    passed: int = 0  # graded status correct
    roofline: Interval = Interval()
    held_out_passed: int = 0  # repeats whose every held-out shape is correct
    held_out_runs: int = 0  # repeats on problems that have held-out shapes (a failed one may have no shapes)
    held_out_rate: float | None = None  # passed / runs; None where no problem of the cell has held-out shapes
    held_out_shapes: int = 0
    held_out_shapes_correct: int = 0
    speedups: dict[str, float] = {}  # over eager, compile, sota: geometric mean over the correct repeats
    input_tokens: float | None = None  # means per repeat, over those that report them
    output_tokens: float | None = None
    cost_usd: float | None = None
    cost_total_usd: float | None = None
    wall_s: float | None = None
    marks: list[str] = []  # audit verdicts on any of its repeats
    attempts: list[Attempt] = []


class Row(BaseModel):
    label: str
    kind: Literal["agent", "solutions"]
    agent: str | None = None
    model: str | None = None
    cells: dict[str, Cell] = {}  # by problem name
    overall: Cell = Cell()  # every repeat of the row, pooled
    fast_p: dict[str, float] = {}  # p -> share of repeats correct and faster than p x eager (p = 0: correct)


class ReferenceRow(BaseModel):
    kind: str  # eager, compile, compile:max-autotune, sota
    device: str
    cells: dict[str, ReferenceCell] = {}


class ProblemColumn(BaseModel):
    name: str  # as stored
    display: str
    deck: str
    plots: list[str] = []  # roofline plots, relative to the report folder


class Leaderboard(BaseModel):
    schema_version: int = SCHEMA_VERSION
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    db: str
    deck: str | None = None
    sweep: str | None = None
    source: Literal["agent_runs", "evaluations"]
    interval: str = METHOD
    roofline: str = ROOFLINE_RULE
    devices: list[str] = []
    problems: list[ProblemColumn] = []
    rows: list[Row] = []
    references: list[ReferenceRow] = []
    speedup_kinds: list[str] = []  # the references some cell has a speedup over
    plots: list[str] = []  # every plot, relative to the report folder (PNG; an SVG lies beside each)
    marks: dict[str, str] = MARKS
    annotations: list[Annotation] = []  # those on the rows' runs


def cell(entries: list[Entry]) -> Cell:
    measurable = any(e.roofline is not None for e in entries)
    counted = [(e.roofline if e.correct else 0.0) if measurable else None for e in entries]
    held = {e.problem for e in entries if e.held_out_shapes}  # problems with held-out shapes
    held_runs = [e for e in entries if e.problem in held]
    held_passed = sum(bool(e.held_out_shapes) and e.held_out_correct == e.held_out_shapes for e in held_runs)
    kinds = sorted({k for e in entries for k in e.speedups}, key=kind_key)
    costs = [e.cost_usd for e in entries if e.cost_usd is not None]
    notes = {n.verdict for e in entries for n in e.notes}
    return Cell(
        runs=len(entries), passed=sum(e.correct for e in entries), roofline=mean_interval(counted),
        held_out_passed=held_passed, held_out_runs=len(held_runs),
        held_out_rate=held_passed / len(held_runs) if held_runs else None,
        held_out_shapes=sum(e.held_out_shapes for e in entries),
        held_out_shapes_correct=sum(e.held_out_correct for e in entries),
        speedups={k: g for k in kinds if (g := geomean(e.speedups.get(k) for e in entries if e.correct)) is not None},
        input_tokens=_mean(e.input_tokens for e in entries), output_tokens=_mean(e.output_tokens for e in entries),
        cost_usd=_mean(costs), cost_total_usd=sum(costs) if costs else None, wall_s=_mean(e.wall_s for e in entries),
        marks=[k for k in MARKS if k in notes],
        attempts=[Attempt(run_id=e.run_id, evaluation_id=e.evaluation_id, solution=e.solution, status=e.status,
                          roofline=c, speedup=e.speedup,
                          held_out=f"{e.held_out_correct}/{e.held_out_shapes}" if e.held_out_shapes else "-",
                          notes=[n.verdict for n in e.notes]) for e, c in zip(entries, counted)])


def fast(entry: Entry, p: float) -> bool:
    """Correct, and faster than p x eager (p = 0: correct, whatever its speed)."""
    return entry.correct and (p == 0 or (entry.speedup is not None and entry.speedup > p))


def build(db: str, source: Literal["agent_runs", "evaluations"], entries: list[Entry],
          facts: dict[tuple[str, str], ProblemFacts], deck: str | None = None, sweep: str | None = None) -> Leaderboard:
    """The document; `facts` are `references.gather`'s, which the plots read too."""
    names = display_names(sorted({e.problem for e in entries} | {p for p, _ in facts}))
    problems = sorted(names, key=lambda p: natural_key(names[p]))
    by_row: dict[str, list[Entry]] = defaultdict(list)
    for entry in entries:
        by_row[entry.row].append(entry)
    rows = []
    for label, mine in by_row.items():
        per_problem: dict[str, list[Entry]] = defaultdict(list)
        for entry in mine:
            per_problem[entry.problem].append(entry)
        rows.append(Row(label=label, kind="agent" if source == "agent_runs" else "solutions", agent=mine[0].agent,
                        model=mine[0].model, cells={p: cell(per_problem[p]) for p in problems if p in per_problem},
                        overall=cell(mine),
                        fast_p={f"{p:g}": sum(fast(e, p) for e in mine) / len(mine) for p in FAST_P}))
    rows.sort(key=lambda r: (r.overall.roofline.mean is None, -(r.overall.roofline.mean or 0.0),
                             -r.overall.passed, r.label))
    devices = sorted({d for _, d in facts} | {d for e in entries if (d := e.device)})
    references = []
    for device in devices:
        per_kind: dict[str, dict[str, ReferenceCell]] = defaultdict(dict)
        for (problem, name), problem_facts in facts.items():
            if name == device:
                for kind, ref in reference_cells(problem_facts).items():
                    per_kind[kind][problem] = ref
        kinds = sorted({"eager", "compile", "sota"} | set(per_kind), key=kind_key)  # a row of '-' says none stored
        references += [ReferenceRow(kind=k, device=device, cells=per_kind.get(k, {})) for k in kinds]
    return Leaderboard(
        db=db, deck=deck, sweep=sweep, source=source, devices=devices,
        problems=[ProblemColumn(name=p, display=names[p], deck=deck_of(p)) for p in problems],
        rows=rows, references=references,
        speedup_kinds=sorted({k for r in rows for c in r.cells.values() for k in c.speedups}, key=kind_key),
        annotations=[n for e in entries for n in e.notes])


def _mean(values: Iterable[float | None]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None
