"""The store's table groups hand back pydantic rows equal to what was written, and the job queue
alone owns its tables: no statement on `jobs` or `sources` is written anywhere else in the package."""

import re
import sqlite3
from pathlib import Path

from test_store import verdict

from rooftop.measure.baselines import BaselineRecord, Platform
from rooftop.measure.measurement import TimingStats
from rooftop.service import queue
from rooftop.service.queue import JobQueue
from rooftop.store.agent_runs import AgentRunRow, AnnotationRow
from rooftop.store.baselines import TimedBaseline
from rooftop.store.db import Store
from rooftop.store.evaluations import EvaluationRow
from rooftop.store.sessions import SessionRow

SRC = Path(__file__).parents[1] / "src" / "rooftop"
# a statement naming one of the queue's tables (SQL keywords are upper case in this code base)
QUEUE_SQL = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN|EXISTS|ON)\s+(?:jobs|sources)\b")


def test_an_evaluation_row_reads_back_what_was_recorded(tmp_path):
    store = Store(tmp_path / "r.db")
    made = verdict("incorrect", -2.0)
    ident = store.evaluations.record(made)
    [row] = store.evaluations.rows()
    env = made.environment
    assert row == EvaluationRow(
        id=ident, run_id=row.run_id, created_at=row.created_at, problem=made.problem,
        problem_version=made.problem_version, solution=made.solution, source_hash=made.source_hash,
        status=made.status, reward=made.reward, device=env.device, device_name=env.device_name, mode=env.mode,
        shapes_selected=made.shapes_selected, geomean_speedup=made.summary.geomean_speedup,
        geomean_roofline=made.summary.geomean_roofline, wall_seconds=made.wall_seconds)
    assert store.evaluations.verdict(ident) == made
    store.close()


def test_a_timed_baseline_row_reads_back_what_was_saved(tmp_path):
    store = Store(tmp_path / "r.db")
    here = Platform(device="cpu", device_name="x86_64", torch="2.13")
    timed = BaselineRecord(platform=here, problem="deck/scale", problem_version=3, shape="tiny", params={"N": 4},
                           kind="compile", mode="max-autotune", stats=TimingStats(clock="fake", samples=[2.0]))
    untimed = timed.model_copy(update={"kind": "sota", "mode": "", "stats": None, "error": "no library"})
    store.baselines.save([timed, untimed])
    assert store.baselines.timed() == [TimedBaseline(problem="deck/scale", problem_version=3, device="cpu",
                                                     device_name="x86_64", shape="tiny", kind="compile",
                                                     mode="max-autotune", median_s=2.0)]
    assert store.baselines.newest(here, "deck/scale", 3) == [timed, untimed]
    store.close()


def test_a_session_row_reads_back_what_was_saved_and_a_closed_one_stays_closed(tmp_path):
    store = Store(tmp_path / "r.db")
    store.sessions.save("s1", "scale", "open", '{"turns": []}')
    assert store.sessions.get("s1") == SessionRow(state="open", episode_json='{"turns": []}')
    store.sessions.save("s1", "scale", "closed", '{"turns": [1]}')
    store.sessions.save("s1", "scale", "open", '{"turns": [1, 2]}')
    assert store.sessions.get("s1") == SessionRow(state="closed", episode_json='{"turns": [1, 2]}')
    assert store.sessions.get("nobody") is None
    store.close()


def test_agent_run_and_annotation_rows_read_back_what_was_saved(tmp_path):
    store = Store(tmp_path / "r.db")
    for ident, sweep in (("r1", "s1"), ("r2", None), ("r3", "s1")):
        store.agent_runs.save(ident, sweep=sweep, agent="a", model=None, problem="p", repeat=0, state="running",
                              visible_job=None, graded_job=None, record_json=f'{{"id": "{ident}"}}')
    store.agent_runs.save("r1", sweep="s1", agent="a", model=None, problem="p", repeat=0, state="done",
                          visible_job="j1", graded_job="j2", record_json='{"id": "r1", "done": true}')
    assert store.agent_runs.runs("s1") == [AgentRunRow(id="r1", state="done", record_json='{"id": "r1", "done": true}'),
                                           AgentRunRow(id="r3", state="running", record_json='{"id": "r3"}')]
    assert [row.id for row in store.agent_runs.runs()] == ["r1", "r2", "r3"]
    note = store.agent_runs.save_annotation("r3", "2026-01-01T00:00:00+00:00", "clean", '{"summary": "fine"}')
    assert store.agent_runs.annotations("r3") == [AnnotationRow(id=note, annotation_json='{"summary": "fine"}')]
    assert store.agent_runs.annotations("r1") == []
    store.close()


def test_the_queue_brings_its_own_tables_to_a_store(tmp_path):
    path = tmp_path / "r.db"
    Store(path).close()
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('jobs', 'sources')"
    assert sqlite3.connect(path).execute(tables).fetchall() == []
    JobQueue(Store(path)).store.close()
    assert sorted(sqlite3.connect(path).execute(tables).fetchall()) == [("jobs",), ("sources",)]
    assert JobQueue(Store(path, must_exist=True)).jobs() == []  # opened again: nothing made twice


def test_no_statement_on_the_queues_tables_outside_the_queue():
    owner = Path(queue.__file__).resolve()
    assert QUEUE_SQL.findall(owner.read_text())  # the scan sees the owner's own statements
    stray = [f"{path.relative_to(SRC)}: {found}" for path in sorted(SRC.rglob("*.py")) if path.resolve() != owner
             for found in QUEUE_SQL.findall(path.read_text())]
    assert not stray, f"SQL on `jobs` or `sources` belongs in service/queue.py: {stray}"
