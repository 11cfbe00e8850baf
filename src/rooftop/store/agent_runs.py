"""Agent runs (`rooftop sweep`, `rooftop agent`) and the audit notes made on them: one document per
run (agents/record.py), keyed by the sweep cell it fills so a sweep resumes from it, and append-only
notes (report/annotations.py)."""

from __future__ import annotations

import time

from pydantic import BaseModel

from rooftop.store.connection import Group, rows_as

SCHEMA = """
-- agent_runs: one row per agent run (`rooftop sweep`, `rooftop agent`); a sweep resumes from it. A
-- run's `sweep`, `agent`, `model`, `problem` and `repeat` are the cell it fills.
CREATE TABLE IF NOT EXISTS agent_runs (
    id TEXT PRIMARY KEY,  -- the run's id, also its folder's name: `<time>_<agent>_<model>_<problem>_<repeat>`
    sweep TEXT,  -- the sweep's name (its config's `name`, else the file's); NULL for a single `rooftop agent` run
    agent TEXT NOT NULL,  -- the agent's label (its config's `name`, else its adapter)
    model TEXT,  -- the model the agent ran with (NULL: its CLI's own)
    problem TEXT NOT NULL,  -- the problem's name
    repeat INTEGER NOT NULL,  -- which repeat of its cell
    state TEXT NOT NULL,  -- `running`, `done`, `failed` (the harness could not run it) or `abandoned` (its
    -- harness was killed)
    updated_at REAL NOT NULL,  -- when it was last saved (Unix time)
    visible_job TEXT,  -- the job of the grading on the visible shapes
    graded_job TEXT,  -- the job of the grading on every shape, held-out ones included
    record_json TEXT NOT NULL  -- the run (`rooftop.agents.record.AgentRun`): exit, budget, completion,
    -- command, usage, both grades
);
CREATE INDEX IF NOT EXISTS agent_runs_by_sweep ON agent_runs(sweep, state);
-- annotations: audit notes on agent runs (`rooftop annotate`), marked on the leaderboard.
CREATE TABLE IF NOT EXISTS annotations (
    id INTEGER PRIMARY KEY,  -- the note
    run_id TEXT NOT NULL REFERENCES agent_runs(id),  -- its run
    created_at TEXT NOT NULL,  -- when it was made
    verdict TEXT NOT NULL,  -- `clean`, `rubric_leak`, `reward_hack`, `interesting` or `bug`
    annotation_json TEXT NOT NULL  -- the note: summary, and quotes with the lines they were checked
    -- against
);
CREATE INDEX IF NOT EXISTS annotations_by_run ON annotations(run_id);
"""


class AgentRunRow(BaseModel):
    """An agent run as stored: its id, its state and its record document (JSON)."""

    id: str
    state: str
    record_json: str


class AnnotationRow(BaseModel):
    """An audit note as stored: its id and its document (JSON, without the id)."""

    id: int
    annotation_json: str


class AgentRunStore(Group):
    def save(self, ident: str, *, sweep: str | None, agent: str, model: str | None, problem: str, repeat: int,
             state: str, visible_job: str | None, graded_job: str | None, record_json: str) -> None:
        """Store a run, or save it again as it goes (its cell stays as first saved)."""
        with self._db:
            self._db.execute("INSERT INTO agent_runs (id, sweep, agent, model, problem, repeat, state, updated_at, "
                             "visible_job, graded_job, record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                             "ON CONFLICT(id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, "
                             "visible_job = excluded.visible_job, graded_job = excluded.graded_job, "
                             "record_json = excluded.record_json",
                             (ident, sweep, agent, model, problem, repeat, state, time.time(), visible_job,
                              graded_job, record_json))

    def runs(self, sweep: str | None = None) -> list[AgentRunRow]:
        """Every agent run, or one sweep's, oldest first."""
        query = "SELECT id, state, record_json FROM agent_runs"
        cursor = (self._db.execute(query + " WHERE sweep = ? ORDER BY rowid", (sweep,)) if sweep is not None
                  else self._db.execute(query + " ORDER BY rowid"))
        return rows_as(AgentRunRow, cursor)

    def save_annotation(self, run_id: str, created_at: str, verdict: str, annotation_json: str) -> int:
        """Append a note; its id."""
        with self._db:
            cur = self._db.execute("INSERT INTO annotations (run_id, created_at, verdict, annotation_json) "
                                   "VALUES (?, ?, ?, ?)", (run_id, created_at, verdict, annotation_json))
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    def annotations(self, run_id: str | None = None) -> list[AnnotationRow]:
        """Every note, or one run's, oldest first."""
        query = "SELECT id, annotation_json FROM annotations"
        cursor = (self._db.execute(query + " WHERE run_id = ? ORDER BY id", (run_id,)) if run_id is not None
                  else self._db.execute(query + " ORDER BY id"))
        return rows_as(AnnotationRow, cursor)
