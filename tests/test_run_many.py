"""`run_many` with the inline backend: the verdicts `run_evaluation` gives, a result per submission
in order (an error where no verdict could be made), fresh jobs only when asked, and each
evaluation's events passed to the caller as it runs. All on the CPU, on the smallest shape."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, fixture_problem

from rooftop.api import run_evaluation
from rooftop.batch.selfcheck import relaxed
from rooftop.service.inputs import Submission
from rooftop.service.jobs import SourceSnapshot
from rooftop.service.many import run_many
from rooftop.solution.loader import load_solution
from rooftop.store.db import Store
from rooftop.verdict import Status
from rooftop.vocabulary import GateStarted, Settings

SETTINGS = Settings(device="cpu", shapes="tiny", timing=False, timeout=60)


def submission(solution: str, problem: str = "scale") -> Submission:
    loaded = load_solution(FIXTURES / "solutions" / solution)
    return Submission(problem=fixture_problem(problem), source=SourceSnapshot.of(loaded), label=solution)


@pytest.fixture
def store(tmp_path):
    opened = Store(tmp_path / "r.db")
    yield opened
    opened.close()


def test_inline_gives_the_verdicts_of_run_evaluation(store):
    names = ["good.py", "wrong.py", "syntax_error.py", "forbidden.py"]
    results = run_many([submission(n) for n in names], SETTINGS, store=store)
    direct = [run_evaluation(fixture_problem("scale"), FIXTURES / "solutions" / n, SETTINGS) for n in names]
    assert [r.verdict.status for r in results if r.verdict] == [v.status for v in direct]
    assert [r.verdict.status for r in results if r.verdict] == [Status.correct, Status.incorrect,
                                                                 Status.compile_error, Status.rejected]
    assert [r.verdict.failed_gate for r in results if r.verdict] == [v.failed_gate for v in direct]
    assert [r.verdict.solution for r in results if r.verdict] == names
    assert store.count() == len(names)  # each verdict recorded once, by the orchestrator


def test_results_come_in_submission_order_with_errors_where_no_verdict_was_made():
    # no store: a temporary one; a snapshot whose files are not those its hash names gets no verdict
    told = []
    good = submission("good.py")
    tampered = good.model_copy(update={"source": good.source.model_copy(update={"source_hash": "0" * 64})})
    items = [submission("wrong.py"), tampered, good]
    results = run_many(items, SETTINGS, on_result=lambda index, result: told.append(index))
    assert results[0].verdict is not None and results[0].verdict.status is Status.incorrect
    assert results[1].verdict is None and results[1].job.state.value == "failed"
    assert "the stored source hashes to" in (results[1].error or "")
    assert results[2].verdict is not None and results[2].verdict.status is Status.correct
    assert told == [0, 1, 2]


def test_the_same_work_is_found_unless_asked_again(store):
    first = run_many([submission("good.py")], SETTINGS, store=store)
    same = run_many([submission("good.py")], SETTINGS, store=store)
    assert same[0].job.id == first[0].job.id and store.count() == 1
    again = run_many([submission("good.py"), submission("good.py")], SETTINGS, store=store, again=True)
    assert len({again[0].job.id, again[1].job.id, first[0].job.id}) == 3 and store.count() == 3


def test_each_evaluations_events_reach_its_own_sink(store):
    seen: dict[int, list[object]] = {}

    def start(index: int):
        return seen.setdefault(index, []).append

    run_many([submission("good.py"), submission("syntax_error.py")], SETTINGS, store=store, on_start=start)
    gates = {index: [e.gate.value for e in events if isinstance(e, GateStarted)] for index, events in seen.items()}
    assert gates[0][0] == "static" and "correctness" in gates[0]
    assert gates[1] == ["static"]  # the syntax error ends it at the static gate


def test_a_problem_changed_in_memory_is_judged_as_it_is_there(store):
    # scale forbids torch.mul; relaxed, it does not: the job carries the name, the backend the object
    [strict, loose] = run_many([submission("forbidden.py"), Submission(
        problem=relaxed(fixture_problem("scale")), source=submission("forbidden.py").source, label="forbidden.py")],
        SETTINGS, store=store)
    assert strict.verdict is not None and strict.verdict.status is Status.rejected
    assert loose.verdict is not None and loose.verdict.status is Status.correct


@pytest.mark.parametrize("backend", ["local", "inline"])
def test_every_backend_answers_through_the_same_call(store, backend):
    results = run_many([submission("good.py"), submission("wrong.py")], SETTINGS, store=store, backend=backend)
    assert [r.verdict.status for r in results if r.verdict] == [Status.correct, Status.incorrect]
