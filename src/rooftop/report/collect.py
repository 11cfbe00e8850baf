"""What a report reads from the store: one entry per graded attempt, and the stored baselines.

An attempt is a finished agent run (its graded verdict: found through its job in the store, or in
the run folder's verdicts/graded.json), or, where the store holds no agent runs, an evaluation:
the newest one of each source on each problem and device, grouped by the languages it is written
in, so that `rooftop demo` or a batch still gives a leaderboard with dense rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rooftop.agents.record import AgentRun
from rooftop.errors import UserError
from rooftop.report import annotations as audit
from rooftop.report.annotations import Annotation
from rooftop.service.queue import JobQueue
from rooftop.store.baselines import TimedBaseline
from rooftop.store.db import Store
from rooftop.verdict import Verdict


@dataclass
class Entry:
    """One graded attempt at one problem, as a leaderboard cell counts it."""

    row: str  # the leaderboard row: "agent / model", or "solutions: <languages>"
    problem: str
    status: str
    agent: str | None = None
    model: str | None = None
    run_id: str | None = None
    evaluation_id: int | None = None
    solution: str | None = None
    verdict: Verdict | None = None
    roofline: float | None = None
    speedup: float | None = None  # over eager
    speedups: dict[str, float] = field(default_factory=dict)  # over eager and every stored reference
    held_out_shapes: int = 0
    held_out_correct: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    wall_s: float | None = None
    notes: list[Annotation] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    @property
    def device(self) -> str | None:
        env = self.verdict.environment if self.verdict else None
        return env.device_name if env else None


def deck_of(problem: str) -> str:
    """A deck problem's deck ('kernelbench/level1' of 'kernelbench/level1/19_ReLU'); for a problem
    stored under its path, the folder it is in."""
    if problem.startswith("/"):
        return Path(problem).parent.name or "/"
    return problem.rsplit("/", 1)[0] if "/" in problem else problem


def in_deck(problem: str, deck: str | None) -> bool:
    if deck is None:
        return True
    name = deck.strip("/")
    return problem.startswith(name + "/") or deck_of(problem) == name


def display_names(problems: list[str]) -> dict[str, str]:
    """Short names: a deck problem's own name, a path's last components, as few as keep them apart."""
    names = {}
    for problem in problems:
        if not problem.startswith("/"):
            names[problem] = problem
            continue
        parts = Path(problem).parts
        for k in range(1, len(parts) + 1):
            short = "/".join(parts[-k:])
            if not any(o != problem and o.endswith("/" + short) for o in problems):
                break
        names[problem] = short
    return names


def agent_entries(store: Store, sweep: str | None, deck: str | None) -> list[Entry]:
    """The finished runs (of one sweep, in one deck), each with its graded verdict where one exists."""
    notes: dict[str, list[Annotation]] = {}
    for note in audit.annotations(store):
        notes.setdefault(note.run_id, []).append(note)
    queue = JobQueue(store)
    entries = []
    for row in store.agent_runs.runs(sweep):
        if row.state != "done":
            continue
        run = AgentRun.model_validate_json(row.record_json)
        if not in_deck(run.problem, deck):
            continue
        graded = run.graded
        verdict = _graded_verdict(store, queue, run)
        correct = graded is not None and graded.status == "correct"
        speedups = dict(verdict.summary.geomean_speedups) if verdict and correct else {}
        if correct and graded is not None and graded.speedup is not None:
            speedups["eager"] = graded.speedup
        entries.append(Entry(
            row=" / ".join([run.agent, run.model or "default"]), problem=run.problem, agent=run.agent, model=run.model,
            status=graded.status if graded else "not_graded", run_id=row.id,
            evaluation_id=None, solution=str(Path(run.folder) / "workspace") if run.folder else None, verdict=verdict,
            roofline=graded.roofline if graded and correct else None,
            speedup=graded.speedup if graded and correct else None, speedups=speedups,
            held_out_shapes=graded.held_out_shapes if graded else 0,
            held_out_correct=graded.held_out_correct if graded else 0,
            input_tokens=run.usage.input_tokens, output_tokens=run.usage.output_tokens, cost_usd=run.usage.cost_usd,
            wall_s=run.wall_s, notes=notes.get(row.id, [])))
    return entries


def _graded_verdict(store: Store, queue: JobQueue, run: AgentRun) -> Verdict | None:
    job = queue.get(run.graded.job) if run.graded and run.graded.job else None
    if job is not None and job.evaluation_id is not None:
        verdict = store.evaluations.verdict(job.evaluation_id)
        if verdict is not None:
            return verdict
    path = Path(run.folder) / "verdicts" / "graded.json" if run.folder else None
    if path is not None and path.is_file():
        try:
            return Verdict.model_validate_json(path.read_text())
        except ValueError:
            return None
    return None


def evaluation_entries(store: Store, deck: str | None) -> list[Entry]:
    """The newest evaluation of each (problem, source, device, shape selection), as entries."""
    seen: set[tuple[str, str, str | None, str | None]] = set()
    entries = []
    for row in store.evaluations.rows():  # newest first
        key = (row.problem, row.source_hash, row.device_name, row.shapes_selected)
        if key in seen or not in_deck(row.problem, deck):
            continue
        seen.add(key)
        verdict = store.evaluations.verdict(row.id)
        if verdict is None:
            continue
        held = [r for r in verdict.shapes if r.split == "held_out"]
        correct = verdict.status.value == "correct"
        speedups = dict(verdict.summary.geomean_speedups) if correct else {}
        if correct and verdict.summary.geomean_speedup is not None:
            speedups["eager"] = verdict.summary.geomean_speedup
        entries.append(Entry(
            row="solutions: " + ("+".join(sorted(verdict.languages)) or "unknown"), problem=row.problem,
            status=verdict.status.value, evaluation_id=row.id, solution=row.solution, verdict=verdict,
            roofline=verdict.summary.geomean_roofline if correct else None,
            speedup=verdict.summary.geomean_speedup if correct else None, speedups=speedups,
            held_out_shapes=len(held), held_out_correct=sum(bool(r.correct) for r in held)))
    entries.reverse()  # oldest first, as agent runs come
    return entries


def stored_baselines(store: Store, deck: str | None) -> list[TimedBaseline]:
    """The timed rows (events, not graphs), oldest first: a later row of the same key wins."""
    return [r for r in store.baselines.timed() if in_deck(r.problem, deck)]


def load(store: Store, sweep: str | None,
         deck: str | None) -> tuple[Literal["agent_runs", "evaluations"], list[Entry], list[TimedBaseline]]:
    """Where the rows come from (agent_runs or evaluations), the entries and the baselines."""
    baselines = stored_baselines(store, deck)
    entries = agent_entries(store, sweep, deck)
    if entries:
        return "agent_runs", entries, baselines
    where = f"{store.path}" + (f" matching --deck {deck}" if deck else "")
    if sweep is not None:
        raise UserError(f"--sweep {sweep}: no finished agent runs of this sweep in {where}")
    entries = evaluation_entries(store, deck)
    if not entries and not baselines:
        raise UserError(f"nothing to report: no finished agent runs, evaluations or baselines in {where} "
                        "(`rooftop sweep`, `rooftop demo` or `rooftop batch` record them)")
    return "evaluations", entries, baselines

