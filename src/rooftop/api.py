"""The library's entry point: what `rooftop eval`, `rooftop demo`, the service and the RL
environment all call to judge a solution and keep the verdict.

    from rooftop import run_evaluation
    verdict = run_evaluation("examples/softmax", "my_softmax.py", store="rooftop.db")
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rooftop.pipeline.evaluate import evaluate
from rooftop.pipeline.trusted.scoring import attach_stored_baselines
from rooftop.problem.registry import resolve
from rooftop.problem.spec import Problem
from rooftop.solution.loader import Solution, load_solution
from rooftop.store.db import Store
from rooftop.verdict import Verdict
from rooftop.vocabulary import EventSink, Settings

_checked: set[tuple[str, float]] = set()  # problems already checked in this process (path, mtime)


def run_evaluation(problem: Problem | str | Path, solution: Solution | str | Path, settings: Settings | None = None,
                   *, store: Store | str | Path | None = None, events: EventSink | None = None,
                   cancel: threading.Event | None = None) -> Verdict:
    """Check the problem, evaluate the solution, apply the stored baselines and record the verdict.

    A problem whose own code does not fit its shapes is a `SpecError` (exit 2 on the command
    line) raised before the solution runs, so it is never recorded against the solution.
    `store` may be an open `Store` (left open) or a path (opened and closed here); None records
    nothing. Setting `cancel` stops the evaluation between two calls with `Cancelled`.
    """
    problem = problem if isinstance(problem, Problem) else resolve(str(problem))
    solution = solution if isinstance(solution, Solution) else load_solution(solution)
    started = time.perf_counter()
    check_once(problem)
    checked = time.perf_counter() - started
    verdict = evaluate(problem, solution, settings, events=events, cancel=cancel)
    verdict.phases = {"check_problem": round(checked, 4), **verdict.phases}
    if store is None:
        return verdict
    opened = store if isinstance(store, Store) else Store(store)
    try:
        attach_stored_baselines(verdict, opened)
        opened.evaluations.record(verdict)
    finally:
        if opened is not store:
            opened.close()
    return verdict


def check_once(problem: Problem) -> None:
    """`problem.validate.check_problem`, once per problem file version in this process."""
    from rooftop.problem.validate import check_problem

    key = (str(problem.reference), problem.reference.stat().st_mtime)
    if key not in _checked:
        check_problem(problem)
        _checked.add(key)
