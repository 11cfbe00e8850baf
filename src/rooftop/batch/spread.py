"""The between-process spread of a problem's speedups, measured: the reference judged as its own
candidate in several fresh evaluations (each a new child, a new reference instance, new weights
and inputs), kept as the `self` baseline of each shape. Every later verdict on this platform
widens its eager speedup's interval by it (measure/spread.py, pipeline/trusted/scoring.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from rooftop.api import run_evaluation
from rooftop.batch.selfcheck import relaxed, self_solution
from rooftop.measure.baselines import BaselineRecord, Platform
from rooftop.problem.spec import Problem, Shape
from rooftop.verdict import Status
from rooftop.vocabulary import DeviceChoice, Settings

RUNS = 3  # self-checks per shape by default: t(2) = 4.3 keeps a spread from three runs honest


def spread_records(problem: Problem, shapes: list[Shape], device: str, runs: int = RUNS,
                   progress: Callable[[str], None] | None = None) -> list[BaselineRecord]:
    """One `self` record per shape: the speedups of `runs` fresh self-checks, or the error that
    stopped them (a reference that is not correct against itself has no spread to speak of)."""
    platform = Platform.here(device)
    records = {s.name: BaselineRecord(platform=platform, problem=problem.name, problem_version=problem.spec.version,
                                      shape=s.name, params=s.params, kind="self") for s in shapes}
    settings = Settings(device=DeviceChoice(device), shapes=",".join(s.name for s in shapes))
    with tempfile.TemporaryDirectory(prefix="rooftop-spread-") as folder:
        solution = self_solution(problem, Path(folder))
        for run in range(runs):
            if progress:
                progress(f"{problem.name}: self-check {run + 1} of {runs}")
            verdict = run_evaluation(relaxed(problem), solution, settings)
            if verdict.status is not Status.correct:
                why = verdict.messages[0] if verdict.messages else f"the verdict was {verdict.status.value}"
                for record in records.values():
                    record.error = f"the reference judged against itself was {verdict.status.value}: {why}"[:300]
                break
            for result in verdict.shapes:
                if result.shape in records and result.speedup is not None and "contention" not in result.flags:
                    records[result.shape].speedups.append(result.speedup)
    for record in records.values():
        if not record.error and len(record.speedups) < 2:
            record.error = f"only {len(record.speedups)} of {runs} self-checks gave a speedup on this shape"
    return list(records.values())
