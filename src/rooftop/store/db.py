"""The results store: SQLite, append-only, one transaction per verdict.

WAL mode and a commit after every verdict mean that a crash mid-run loses nothing already
recorded. The whole verdict document is kept as JSON beside the columns that queries need.
The comments in `SCHEMA` describe every table and column; docs/DATABASE.md is generated from them
(`python -m rooftop.store.schema_doc > docs/DATABASE.md`).
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from rooftop.errors import UserError
from rooftop.verdict import Status, Verdict

if TYPE_CHECKING:
    from rooftop.measure.baselines import BaselineRecord, Platform
    from rooftop.score.calibrate import HardwareProfile

# 2: baselines and hardware_profiles; 3: jobs and sources; 4: sessions (each added by CREATE IF NOT EXISTS,
# no migration)
SCHEMA_VERSION = 6

SCHEMA = """
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
-- baselines: one row per timed reference; the newest row for a key wins. The key is the platform
-- (`device`, `device_name`, `torch`, `triton`, `cuda`), the problem and its version, `graphs`, and
-- the shape, its parameters, the kind and the mode.
CREATE TABLE IF NOT EXISTS baselines (
    id INTEGER PRIMARY KEY,  -- row id
    created_at TEXT NOT NULL,  -- when it was stored
    device TEXT NOT NULL,  -- the platform it was timed on: `cuda` or `cpu`
    device_name TEXT NOT NULL,  -- the platform it was timed on: the device's name
    torch TEXT NOT NULL,  -- the platform it was timed on: torch's version
    triton TEXT,  -- the platform it was timed on: Triton's version (NULL without Triton)
    cuda TEXT,  -- the platform it was timed on: CUDA's version (NULL without CUDA)
    problem TEXT NOT NULL,  -- stored problem name
    problem_version INTEGER NOT NULL,  -- its spec version
    shape TEXT NOT NULL,  -- shape name
    params TEXT NOT NULL,  -- the shape's parameters (JSON, sorted keys)
    kind TEXT NOT NULL,  -- `eager`, `compile`, `sota`, `starter` (a kernel-to-kernel task's starter) or
    -- `self` (the reference judged as its own candidate in fresh processes: no time, its speedups over
    -- itself in `record_json`)
    mode TEXT NOT NULL,  -- the compile mode (`default`, `max-autotune`; empty for other kinds)
    graphs INTEGER NOT NULL,  -- 1 when timed as CUDA-graph replays
    median_s REAL,  -- median time in seconds; NULL when it could not be timed (and for `self`)
    error TEXT NOT NULL,  -- why it was not timed (empty when it was)
    record_json TEXT NOT NULL  -- the whole record, samples included
);
-- hardware_profiles: one row per `rooftop calibrate`; `Store.profile` reads the newest for a device.
CREATE TABLE IF NOT EXISTS hardware_profiles (
    id INTEGER PRIMARY KEY,  -- row id
    created_at TEXT NOT NULL,  -- when it was stored
    device_name TEXT NOT NULL,  -- the GPU's name
    profile_json TEXT NOT NULL  -- the profile: measured matmul and copy ceilings beside the datasheet,
    -- SMs, L2, memory, clocks, versions
);
-- sources: the files of every submitted solution, so a job judges what was submitted.
CREATE TABLE IF NOT EXISTS sources (
    source_hash TEXT PRIMARY KEY,  -- the hash `load_solution` computes
    kind TEXT NOT NULL,  -- `file` or `folder`
    entry TEXT NOT NULL,  -- the file to load
    files_json TEXT NOT NULL  -- `{relative path: base64 of the bytes}`
);
-- jobs: one row per job of `rooftop batch` (and of the services built on the same queue: the
-- environment, `rooftop serve`, agent runs and search).
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,  -- the job id: a digest of the problem (name, version, files), the solution's
    -- source hash and the settings
    created_at TEXT NOT NULL,  -- when it was queued
    updated_at TEXT NOT NULL,  -- when its row last changed
    problem TEXT NOT NULL,  -- the problem's stored name
    problem_version INTEGER NOT NULL,  -- the problem's spec version
    problem_hash TEXT NOT NULL,  -- a digest of the problem's files and spec
    solution TEXT NOT NULL,  -- the path or name it was submitted as
    source_hash TEXT NOT NULL REFERENCES sources(source_hash),  -- the solution's source (its files are in
    -- `sources`)
    settings_json TEXT NOT NULL,  -- the evaluation settings (docs/CONFIGURATION.md)
    state TEXT NOT NULL,  -- `queued`, `building`, `built`, `running`, `done` (a verdict is recorded) or
    -- `failed` (none could be made); a job with nothing to compile (PyTorch, Triton) is queued `built`
    attempts INTEGER NOT NULL DEFAULT 0,  -- evaluations started on a device (more than 1 only after a
    -- worker or the orchestrator died)
    owner TEXT,  -- the orchestrator holding it (`host:pid:start`) while building or running
    lease_until REAL,  -- until when that orchestrator holds it (Unix time)
    device TEXT,  -- the worker it ran on (`cuda:0`, `cpu:1`; a GPU's second worker is `cuda:0.1`); NULL
    -- when the build stage settled it
    queued_at REAL NOT NULL,  -- Unix time it was queued
    build_wait_s REAL,  -- seconds queued before a builder took it (NULL: nothing to compile)
    build_s REAL,  -- seconds its build took (NULL: nothing to compile)
    build_cached INTEGER,  -- 1 when the build cache had it (NULL: nothing to compile)
    run_wait_s REAL,  -- seconds built before a device worker took it
    built_at REAL,  -- Unix time it was built
    evaluation_id INTEGER REFERENCES evaluations(id),  -- its verdict's `evaluations` row
    status TEXT,  -- its verdict's status
    error TEXT  -- why it failed
);
-- sessions: one row per episode started through `rooftop serve`.
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,  -- the session id
    created_at TEXT NOT NULL,  -- when it started
    updated_at REAL NOT NULL,  -- when it was last saved (Unix time; idle sessions are reaped by it)
    task TEXT NOT NULL,  -- the problem's name
    state TEXT NOT NULL,  -- `open`, `done` (finished or truncated), `closed` (deleted) or `expired` (idle
    -- too long); a closed or expired session stays so
    episode_json TEXT NOT NULL  -- the episode: turns, their jobs, the best kernel's job and source,
    -- rewards
);
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
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, queued_at);
CREATE INDEX IF NOT EXISTS baselines_by_key ON baselines(problem, problem_version, device_name, torch);
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


class Store:
    def __init__(self, path: str | Path, must_exist: bool = False) -> None:
        """Open (and, unless `must_exist`, create) the database; readers pass `must_exist` so a
        mistyped path is an error rather than a new empty database."""
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
            self._db.executescript(SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{self.path}: not a usable results database ({exc})") from None
        self._run_id: int | None = None

    def start_run(self, command: str | None = None) -> int:
        from rooftop.environment import rooftop_version

        cur = self._db.execute(
            "INSERT INTO runs (started_at, command, host, rooftop_version) VALUES (?, ?, ?, ?)",
            (_now(), command or " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
             platform.node() or os.uname().nodename, rooftop_version()))
        self._db.commit()
        assert cur.lastrowid is not None  # set by every INSERT
        self._run_id = int(cur.lastrowid)
        return self._run_id

    def record(self, verdict: Verdict) -> int:
        """Append one verdict and commit at once."""
        with self._db:
            return self.insert_verdict(verdict)

    def transaction(self) -> sqlite3.Connection:
        """`with store.transaction() as db:` commits what the block wrote, or none of it."""
        return self._db

    def insert_verdict(self, verdict: Verdict) -> int:
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
            (self._run_id, _now(), verdict.problem, verdict.problem_version, verdict.solution,
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
        query = "SELECT verdict_json FROM evaluations"
        args: tuple[str, ...] = ()
        if problem:
            query, args = query + " WHERE problem = ?", (problem,)
        return [Verdict.model_validate(json.loads(row[0])) for row in self._db.execute(query + " ORDER BY id", args)]

    def evaluations(self, problem: str | list[str] | None = None, status: Status | None = None,
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
        cursor = self._db.execute(query, args)
        columns = [c[0] for c in cursor.description]
        return [EvaluationRow.model_validate(dict(zip(columns, row))) for row in cursor]

    def verdict(self, evaluation_id: int) -> Verdict | None:
        row = self._db.execute("SELECT verdict_json FROM evaluations WHERE id = ?", (evaluation_id,)).fetchone()
        return Verdict.model_validate_json(row[0]) if row else None

    # -- baselines: newest record wins ---------------------------------------------------------
    def save_baselines(self, records: list[BaselineRecord]) -> None:
        with self._db:
            self._db.executemany(
                """INSERT INTO baselines (created_at, device, device_name, torch, triton, cuda, problem,
                   problem_version, shape, params, kind, mode, graphs, median_s, error, record_json)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [(_now(), r.platform.device, r.platform.device_name, r.platform.torch, r.platform.triton,
                  r.platform.cuda, r.problem, r.problem_version, r.shape, r.params_key, r.kind, r.mode,
                  int(r.graphs), r.stats.median if r.stats else None, r.error, r.model_dump_json())
                 for r in records])

    def baselines(self, platform: Platform, problem: str, version: int,
                  graphs: bool = False) -> list[BaselineRecord]:
        """The newest record of each (shape, params, kind, mode) for this platform and problem version."""
        from rooftop.measure.baselines import BaselineRecord

        rows = self._db.execute(
            """SELECT record_json FROM baselines WHERE device = ? AND device_name = ? AND torch = ?
               AND triton IS ? AND cuda IS ? AND problem = ? AND problem_version = ? AND graphs = ?
               ORDER BY id""",
            (platform.device, platform.device_name, platform.torch, platform.triton, platform.cuda, problem,
             version, int(graphs))).fetchall()
        newest: dict[tuple[str, str, str, str], BaselineRecord] = {}
        for (text,) in rows:
            record = BaselineRecord.model_validate_json(text)
            newest[(record.shape, record.params_key, record.kind, record.mode)] = record
        return list(newest.values())

    # -- hardware profiles ------------------------------------------------------------------
    def save_profile(self, profile: HardwareProfile) -> None:
        with self._db:
            self._db.execute("INSERT INTO hardware_profiles (created_at, device_name, profile_json) VALUES (?, ?, ?)",
                             (_now(), profile.device_name, profile.model_dump_json()))

    def profile(self, device_name: str) -> HardwareProfile | None:
        from rooftop.score.calibrate import HardwareProfile

        row = self._db.execute("SELECT profile_json FROM hardware_profiles WHERE device_name = ? ORDER BY id DESC "
                               "LIMIT 1", (device_name,)).fetchone()
        return HardwareProfile.model_validate_json(row[0]) if row else None

    # -- sessions of the HTTP server: an episode document and its state -----------------------
    def save_session(self, ident: str, task: str, state: str, episode_json: str) -> None:
        """Store a session's document and state. A session once `closed` or `expired` stays so: a
        tool call that was running when it was closed saves its turn, not its old state."""
        import time

        with self._db:
            self._db.execute("INSERT INTO sessions (id, created_at, updated_at, task, state, episode_json) "
                             "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                             "updated_at = excluded.updated_at, episode_json = excluded.episode_json, "
                             "state = CASE WHEN sessions.state IN ('closed', 'expired') THEN sessions.state "
                             "ELSE excluded.state END",
                             (ident, _now(), time.time(), task, state, episode_json))

    def session(self, ident: str) -> tuple[str, str] | None:
        """A session's state and episode document."""
        row = self._db.execute("SELECT state, episode_json FROM sessions WHERE id = ?", (ident,)).fetchone()
        return (row[0], row[1]) if row else None

    def expire_sessions(self, idle_since: float) -> int:
        """Open sessions untouched since `idle_since` (epoch seconds) become expired; how many."""
        with self._db:
            cur = self._db.execute("UPDATE sessions SET state = 'expired' WHERE state = 'open' AND updated_at < ?",
                                   (idle_since,))
        return cur.rowcount

    # -- agent runs: one document per run (agents/record.py), keyed for sweeps' resume ---------
    def save_agent_run(self, ident: str, *, sweep: str | None, agent: str, model: str | None, problem: str,
                       repeat: int, state: str, visible_job: str | None, graded_job: str | None,
                       record_json: str) -> None:
        import time

        with self._db:
            self._db.execute("INSERT INTO agent_runs (id, sweep, agent, model, problem, repeat, state, updated_at, "
                             "visible_job, graded_job, record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                             "ON CONFLICT(id) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, "
                             "visible_job = excluded.visible_job, graded_job = excluded.graded_job, "
                             "record_json = excluded.record_json",
                             (ident, sweep, agent, model, problem, repeat, state, time.time(), visible_job,
                              graded_job, record_json))

    def agent_runs(self, sweep: str | None = None) -> list[tuple[str, str, str]]:
        """(id, state, record document) of every agent run, or of one sweep's, oldest first."""
        query = "SELECT id, state, record_json FROM agent_runs"
        rows = (self._db.execute(query + " WHERE sweep = ? ORDER BY rowid", (sweep,)) if sweep is not None
                else self._db.execute(query + " ORDER BY rowid"))
        return [(r[0], r[1], r[2]) for r in rows]

    # -- audit notes on agent runs (report/annotations.py) --------------------------------------
    def save_annotation(self, run_id: str, created_at: str, verdict: str, annotation_json: str) -> int:
        with self._db:
            cur = self._db.execute("INSERT INTO annotations (run_id, created_at, verdict, annotation_json) "
                                   "VALUES (?, ?, ?, ?)", (run_id, created_at, verdict, annotation_json))
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    def annotations(self, run_id: str | None = None) -> list[tuple[int, str]]:
        """(id, document) of every note, or of one run's, oldest first."""
        query = "SELECT id, annotation_json FROM annotations"
        rows = (self._db.execute(query + " WHERE run_id = ? ORDER BY id", (run_id,)) if run_id is not None
                else self._db.execute(query + " ORDER BY id"))
        return [(int(r[0]), r[1]) for r in rows]

    def timed_baselines(self) -> list[tuple[str, int, str, str, str, str, str, float]]:
        """Every baseline row with a time, timed by events (not graphs), oldest first: (problem,
        problem_version, device, device_name, shape, kind, mode, median_s). Unlike `baselines`, it
        needs no platform, so a reader that never imports torch can use it."""
        return [tuple(r) for r in self._db.execute(
            "SELECT problem, problem_version, device, device_name, shape, kind, mode, median_s FROM baselines "
            "WHERE median_s IS NOT NULL AND graphs = 0 ORDER BY id")]

    def count(self, table: str = "evaluations") -> int:
        if table not in {"runs", "evaluations", "shape_results", "baselines", "hardware_profiles", "jobs", "sources",
                         "sessions", "agent_runs", "annotations"}:
            raise ValueError(table)
        return int(self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
