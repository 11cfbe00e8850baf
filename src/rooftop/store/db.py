"""The results store: one SQLite file, append-only, one transaction per verdict.

`Store` opens the file once and hands its connection to each table group's store, which owns that
group's schema and queries: `evaluations` (store/evaluations.py), `baselines` (store/baselines.py),
`sessions` (store/sessions.py), `agent_runs` (store/agent_runs.py). The job queue brings its own
tables (service/queue.py). docs/DATABASE.md is generated from the schemas' comments
(`python -m rooftop.service.schema_doc > docs/DATABASE.md`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rooftop.store import agent_runs, baselines, evaluations, sessions
from rooftop.store.connection import Database

SCHEMAS = [evaluations.SCHEMA, baselines.SCHEMA, sessions.SCHEMA, agent_runs.SCHEMA]


class Store:
    """The table groups of one results database, over one connection."""

    def __init__(self, path: str | Path, must_exist: bool = False) -> None:
        """Open (and, unless `must_exist`, create) the database; readers pass `must_exist` so a
        mistyped path is an error rather than a new empty database."""
        self.database = Database(path, SCHEMAS, must_exist=must_exist)
        self.path = self.database.path
        self.evaluations = evaluations.EvaluationStore(self.database)
        self.baselines = baselines.BaselineStore(self.database)
        self.sessions = sessions.SessionStore(self.database)
        self.agent_runs = agent_runs.AgentRunStore(self.database)

    def transaction(self) -> sqlite3.Connection:
        """`with store.transaction() as db:` commits what the block wrote, or none of it."""
        return self.database.transaction()

    def count(self, table: str = "evaluations") -> int:
        return self.database.count(table)

    def close(self) -> None:
        self.database.close()
