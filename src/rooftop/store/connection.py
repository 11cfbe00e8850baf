"""The one connection every table group shares: SQLite in WAL mode, foreign keys on, a commit per record.

WAL and a commit after every record mean that a crash mid-run loses nothing already recorded. Each
group of tables (store/evaluations.py, store/baselines.py, store/sessions.py, store/agent_runs.py, and
the job queue's service/queue.py) owns its `SCHEMA`, and creates it on this connection with
`Database.ensure`; `ABOUT` is the part of docs/DATABASE.md that speaks of the file as a whole.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from rooftop.errors import UserError

# 2: baselines and hardware_profiles; 3: jobs and sources; 4: sessions (each added by CREATE IF NOT EXISTS,
# no migration)
SCHEMA_VERSION = 6

ABOUT = """
-- `eval`, `demo`, `batch`, `baselines` and `calibrate` append to one SQLite file (`./rooftop.db` unless
-- `--db PATH`), in WAL mode, one commit per record, so a crash mid-run loses nothing already recorded.
-- Rows are never deleted, and never updated except those of work in progress: a job's row in `jobs`,
-- which moves through its states, and a session's in `sessions` and an agent run's in `agent_runs`,
-- saved again as they go. TEXT times are ISO 8601 in UTC; REAL times (in `jobs`, `sessions` and
-- `agent_runs`) are Unix times. A problem is stored under a name unique to it: `<deck>/<name>` for a
-- bundled problem, otherwise the resolved path of its folder (or of its KernelBench-style `.py` file),
-- so two folders whose specs share a name are kept apart. `PRAGMA user_version` holds the schema
-- version. `rooftop results` lists and shows the rows of `evaluations` (docs/CLI.md); any SQLite
-- client reads every table (`sqlite3 rooftop.db`).
"""


class Database:
    """An open results database; the group stores share it, so one `with db.transaction():` may span
    several groups' writes (a verdict and its job's move to done)."""

    def __init__(self, path: str | Path, schemas: list[str], must_exist: bool = False) -> None:
        """Open (and, unless `must_exist`, create) the database with `schemas`; readers pass
        `must_exist` so a mistyped path is an error rather than a new empty database."""
        self.path = Path(path)
        if must_exist and not self.path.is_file():
            raise UserError(f"--db {self.path}: no such results database")
        try:
            if not must_exist:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UserError(f"{self.path}: results database schema {version} is newer than this "
                                f"rooftop understands ({SCHEMA_VERSION})")
            self._db.executescript("".join(schemas))
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a usable results database ({exc})") from None

    def ensure(self, schema: str) -> None:
        """Create a group's tables if they are missing (a group above the store, such as the job queue,
        brings its own)."""
        try:
            self._db.executescript(schema)
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a usable results database ({exc})") from None

    def transaction(self) -> sqlite3.Connection:
        """`with db.transaction() as conn:` commits what the block wrote, or none of it."""
        return self._db

    def count(self, table: str) -> int:
        tables = {name for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if table not in tables:
            raise ValueError(table)
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class Group:
    """A table group's store: its queries, on the connection every group shares."""

    def __init__(self, db: Database) -> None:
        self._db = db.transaction()


Row = TypeVar("Row", bound=BaseModel)


def rows_as(model: type[Row], cursor: sqlite3.Cursor) -> list[Row]:
    """A query's rows as `model`s, each column read into the field of its name."""
    columns = [c[0] for c in cursor.description]
    return [model.model_validate(dict(zip(columns, row))) for row in cursor]


def now() -> str:
    """The time a row is stored at: ISO 8601 in UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")
