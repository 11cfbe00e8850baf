"""Verdicts: the `runs` that recorded them, one `evaluations` row each (the whole document as JSON
beside the columns queries need), and one `shape_results` row per shape.

Append-only: a verdict is one transaction, committed at once by `record`, or by the caller's
transaction through `insert` (the job queue records a verdict and its job's move to done together).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

from pydantic import BaseModel

from rooftop.store.connection import Database, Group, now, rows_as
from rooftop.verdict import Status, Verdict

SCHEMA = """
-- runs: one row per command that recorded evaluations.
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,  -- run id
    started_at TEXT NOT NULL,  -- when the command started
    command TEXT NOT NULL,  -- the command line
    host TEXT NOT NULL,  -- machine name
    rooftop_version TEXT NOT NULL  -- rooftop's version
);
-- evaluations: one row per verdict; `verdict_json` is the whole document, the other columns are
-- copies of its fields for queries.
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY,  -- evaluation id (`rooftop results show ID`)
    run_id INTEGER NOT NULL REFERENCES runs(id),  -- the `runs` row it belongs to
    created_at TEXT NOT NULL,  -- when it was recorded
    problem TEXT NOT NULL,  -- the problem's stored name
    problem_version INTEGER NOT NULL,  -- the problem's spec version
    solution TEXT NOT NULL,  -- resolved path of the solution file or folder (`batch`: the path or name
    -- it was submitted as)
    source_hash TEXT NOT NULL,  -- hash of the solution's source files
    status TEXT NOT NULL,  -- the verdict's status (docs/VERDICT.md)
    reward REAL,  -- the verdict's reward (NULL when ungraded: `needs_gpu`)
    device TEXT,  -- `cuda` or `cpu`; NULL when no environment was collected
    device_name TEXT,  -- the device's name; NULL when no environment was collected
    mode TEXT,  -- how it ran (`gpu`, `cpu`, `cpu+triton-interpreter`, `cpu (compile check only)`); NULL
    -- when no environment was collected
    shapes_selected TEXT,  -- which shapes ran (`visible`, `held_out`, `all`, `smoke`; `auto` resolved)
    geomean_speedup REAL,  -- geometric mean over shapes of the paired speedup over eager (NULL when
    -- nothing was timed)
    geomean_roofline REAL,  -- geometric mean of the roofline fractions (NULL without a datasheet entry)
    wall_seconds REAL,  -- wall time of the whole evaluation
    verdict_json TEXT NOT NULL  -- the verdict document, as `--json` prints it
);
-- shape_results: one row per shape of an evaluation; key (`evaluation_id`, `shape`).
CREATE TABLE IF NOT EXISTS shape_results (
    evaluation_id INTEGER NOT NULL REFERENCES evaluations(id),  -- the `evaluations` row
    shape TEXT NOT NULL,  -- shape name
    split TEXT NOT NULL,  -- its split (`visible`, `held_out`, `smoke`)
    correct INTEGER,  -- 1, 0, or NULL when not checked
    median_s REAL,  -- the candidate's timing: median, in seconds (NULL when not timed)
    iqr_s REAL,  -- the candidate's timing: interquartile range, in seconds
    min_s REAL,  -- the candidate's timing: minimum, in seconds
    n INTEGER,  -- the candidate's timing: sample count
    reference_median_s REAL,  -- the eager reference's median, timed alongside
    tflops REAL,  -- achieved TFLOP/s
    gbps REAL,  -- achieved GB/s
    roofline_fraction REAL,  -- fraction of the hardware roof reached
    speedup REAL,  -- paired speedup over eager
    PRIMARY KEY (evaluation_id, shape)
);
CREATE INDEX IF NOT EXISTS evaluations_by_problem ON evaluations(problem, problem_version, status);
CREATE INDEX IF NOT EXISTS evaluations_by_source ON evaluations(source_hash);
"""


class EvaluationRow(BaseModel):
    """One row of `evaluations` without its verdict document: what a listing shows."""

    id: int
    run_id: int
    created_at: str  # ISO 8601, UTC
    problem: str
    problem_version: int
    solution: str
    source_hash: str
    status: Status
    reward: float | None
    device: str | None
    device_name: str | None
    mode: str | None
    shapes_selected: str | None
    geomean_speedup: float | None
    geomean_roofline: float | None
    wall_seconds: float | None


_ROW_COLUMNS = ", ".join(EvaluationRow.model_fields)


class EvaluationStore(Group):
    """The verdicts of one database; the run they belong to is started on the first one recorded."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._run_id: int | None = None

    def start_run(self, command: str | None = None) -> int:
        from rooftop.environment import rooftop_version

        cur = self._db.execute(
            "INSERT INTO runs (started_at, command, host, rooftop_version) VALUES (?, ?, ?, ?)",
            (now(), command or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
             platform.node() or os.uname().nodename, rooftop_version()))
        self._db.commit()
        assert cur.lastrowid is not None  # set by every INSERT
        self._run_id = int(cur.lastrowid)
        return self._run_id

    def record(self, verdict: Verdict) -> int:
        """Append one verdict and commit at once; its evaluation id."""
        with self._db:
            return self.insert(verdict)

    def insert(self, verdict: Verdict) -> int:
        """Append one verdict inside the caller's transaction (started first: the run it belongs to
        is committed on its own); its evaluation id."""
        if self._run_id is None:
            self.start_run()
        env = verdict.environment
        cur = self._db.execute(
            """INSERT INTO evaluations (run_id, created_at, problem, problem_version, solution,
               source_hash, status, reward, device, device_name, mode, shapes_selected,
               geomean_speedup, geomean_roofline, wall_seconds, verdict_json)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (self._run_id, now(), verdict.problem, verdict.problem_version, verdict.solution,
             verdict.source_hash, verdict.status.value, verdict.reward,
             env.device if env else None, env.device_name if env else None, env.mode if env else None,
             verdict.shapes_selected, verdict.summary.geomean_speedup, verdict.summary.geomean_roofline,
             verdict.wall_seconds, verdict.model_dump_json()))
        assert cur.lastrowid is not None
        evaluation_id = int(cur.lastrowid)
        self._db.executemany(
            """INSERT INTO shape_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [(evaluation_id, r.shape, r.split, None if r.correct is None else int(r.correct),
              r.candidate.median if r.candidate else None, r.candidate.iqr if r.candidate else None,
              r.candidate.min if r.candidate else None, r.candidate.n if r.candidate else None,
              r.reference.median if r.reference else None, r.tflops, r.gbps, r.roofline_fraction,
              r.speedup) for r in verdict.shapes])
        return evaluation_id

    def verdicts(self, problem: str | None = None) -> list[Verdict]:
        """Every verdict (or one problem's), oldest first."""
        query = "SELECT verdict_json FROM evaluations"
        args: tuple[str, ...] = ()
        if problem:
            query, args = query + " WHERE problem = ?", (problem,)
        return [Verdict.model_validate(json.loads(row[0])) for row in self._db.execute(query + " ORDER BY id", args)]

    def rows(self, problem: str | list[str] | None = None, status: Status | None = None,
             last: int | None = None) -> list[EvaluationRow]:
        """Evaluations, newest first. `problem` (a name, or several: any of them) matches a stored
        name exactly or as its trailing path components ('scale' finds '/any/where/scale' and
        'examples/scale', not 'upscale'); `last` keeps the newest `last` of those that match."""
        where: list[str] = []
        args: list[object] = []
        names = [problem] if isinstance(problem, str) else list(problem or [])
        if names:  # substr, not LIKE: names are paths, and LIKE ignores case
            where.append("(" + " OR ".join(["problem = ? OR substr(problem, -?) = ?"] * len(names)) + ")")
            for name in names:
                args += [name, len(name) + 1, "/" + name]
        if status is not None:
            where.append("status = ?")
            args.append(status.value)
        query = f"SELECT {_ROW_COLUMNS} FROM evaluations"
        query += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC"
        if last is not None:
            query, args = query + " LIMIT ?", [*args, last]
        return rows_as(EvaluationRow, self._db.execute(query, args))

    def verdict(self, evaluation_id: int) -> Verdict | None:
        row = self._db.execute("SELECT verdict_json FROM evaluations WHERE id = ?", (evaluation_id,)).fetchone()
        return Verdict.model_validate_json(row[0]) if row else None
