"""The durable job queue: the `jobs` and `sources` tables of the results database, owned here and
moved along by one orchestrator. Every statement on them is in this module.

A job goes queued → building → built → running → done (a verdict is recorded) or failed (none
could be made). Whoever moves a job into building or running becomes its owner and holds a lease
it renews while it works; a job whose owner died (a process of this host that is gone) or whose
lease ran out is handed back by `recover`: building to queued, running to built (what was built
is in the build cache). The verdict and the job's move to done are one transaction, so a job is
recorded once or not at all: an orchestrator killed at any moment and started again finishes
the batch with none lost and none recorded twice. A job cut off mid-evaluation is evaluated
again from the start; `attempts` counts the evaluations started.

A job with nothing to compile (PyTorch, Triton) is submitted built: the build pool is there for
compilers, and such a job's only gate before its device, the static one, takes milliseconds
there; in the pool's line it would wait behind every nvcc build queued before it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Iterable

from rooftop.problem.spec import Problem
from rooftop.service.jobs import FINAL, Job, JobState, SourceSnapshot, job_id, problem_hash
from rooftop.solution.loader import Solution, needs_build
from rooftop.store.db import Store
from rooftop.verdict import Verdict
from rooftop.vocabulary import Settings

LEASE_SECONDS = 120.0  # a lease not renewed for this long is taken to be abandoned
MAX_ATTEMPTS = 3  # evaluations started for one job before it is failed (its candidate keeps killing workers)

SCHEMA = """
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
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, queued_at);
"""

_COLUMNS = ", ".join(f for f in Job.model_fields if f != "settings") + ", settings_json"


def process_start(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (None: no such process); with the pid
    it names one process, so a pid reused by another process is not mistaken for the owner."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def this_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid()) or 0}"


def owner_alive(owner: str) -> bool | None:
    """Whether the owner process lives: None when it is on another host (its lease decides)."""
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return process_start(int(pid)) == start


class JobQueue:
    def __init__(self, store: Store, owner: str | None = None) -> None:
        self.store = store
        self.owner = owner or this_owner()
        store.database.ensure(SCHEMA)
        self._db = store.transaction()

    # -- submitting ------------------------------------------------------------------------
    def submit(self, problem: Problem, solution: Solution | SourceSnapshot, settings: Settings,
               label: str | None = None, again: bool = False, prebuild: bool = True) -> tuple[str, bool]:
        """The job's id, and whether it is new (False: the same work was submitted before). `again`
        makes a new job even so (a nonce in its id); `prebuild` False queues it built, to be
        compiled by its evaluation's own child (the inline backend builds nothing ahead)."""
        snapshot = solution if isinstance(solution, SourceSnapshot) else SourceSnapshot.of(solution)
        digest = problem_hash(problem)
        ident = job_id(problem, digest, snapshot.source_hash, settings, secrets.token_hex(8) if again else None)
        name = label or (str(solution.path) if isinstance(solution, Solution) else snapshot.entry)
        now, stamp = time.time(), _stamp()
        compiled = prebuild and needs_build(solution.languages)
        with self._db:
            self._db.execute("INSERT OR IGNORE INTO sources (source_hash, kind, entry, files_json) VALUES (?, ?, ?, ?)",
                             (snapshot.source_hash, snapshot.kind, snapshot.entry, json.dumps(snapshot.files)))
            cur = self._db.execute(
                """INSERT OR IGNORE INTO jobs (id, created_at, updated_at, problem, problem_version, problem_hash,
                   solution, source_hash, settings_json, state, queued_at, built_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (ident, stamp, stamp, problem.name, problem.spec.version, digest, name, snapshot.source_hash,
                 settings.model_dump_json(), (JobState.queued if compiled else JobState.built).value, now,
                 None if compiled else now))
        return ident, cur.rowcount == 1

    def source(self, source_hash: str) -> SourceSnapshot:
        row = self._db.execute("SELECT kind, entry, files_json FROM sources WHERE source_hash = ?",
                               (source_hash,)).fetchone()
        if row is None:
            raise KeyError(source_hash)
        return SourceSnapshot(source_hash=source_hash, kind=row[0], entry=row[1], files=json.loads(row[2]))

    # -- reading ---------------------------------------------------------------------------
    def get(self, ident: str) -> Job | None:
        rows = self._select("WHERE id = ?", (ident,))
        return rows[0] if rows else None

    def jobs(self, ids: Iterable[str] | None = None, state: JobState | None = None) -> list[Job]:
        if ids is not None:
            wanted = list(dict.fromkeys(ids))
            found: dict[str, Job] = {}
            for start in range(0, len(wanted), 500):  # SQLite caps the variables of one statement
                chunk = wanted[start:start + 500]
                for job in self._select(f"WHERE id IN ({','.join('?' * len(chunk))})", tuple(chunk)):
                    found[job.id] = job
            jobs = [found[i] for i in wanted if i in found]
            return [j for j in jobs if state is None or j.state is state]
        if state is not None:
            return self._select("WHERE state = ? ORDER BY queued_at, id", (state.value,))
        return self._select("ORDER BY queued_at, id", ())

    def counts(self, ids: Iterable[str] | None = None) -> dict[JobState, int]:
        """Jobs per state (among `ids` when given), counted in SQL: asked every second of a batch."""
        counts = {s: 0 for s in JobState}
        wanted = list(dict.fromkeys(ids)) if ids is not None else None
        chunks = [wanted[i:i + 500] for i in range(0, len(wanted), 500)] if wanted is not None else [None]
        for chunk in chunks:
            where, args = ("", ()) if chunk is None else (f"WHERE id IN ({','.join('?' * len(chunk))})", tuple(chunk))
            for state, n in self._db.execute(f"SELECT state, count(*) FROM jobs {where} GROUP BY state", args):
                counts[JobState(state)] += n
        return counts

    def _select(self, where: str, args: tuple[object, ...]) -> list[Job]:
        cursor = self._db.execute(f"SELECT {_COLUMNS} FROM jobs {where}", args)
        names = [c[0] for c in cursor.description]
        out = []
        for row in cursor:
            data = dict(zip(names, row))
            data["settings"] = Settings.model_validate_json(data.pop("settings_json"))
            out.append(Job.model_validate(data))
        return out

    # -- moving jobs along -----------------------------------------------------------------
    def claim(self, state: JobState, to: JobState, limit: int = 1, ids: Iterable[str] | None = None,
              device: str | None = None) -> list[Job]:
        """Take up to `limit` unowned jobs in `state` (oldest first; only among `ids` when given:
        a set is used as it is, so a caller that claims often builds it once) and move them to
        `to` under this owner's lease."""
        now = time.time()
        allowed = None if ids is None else ids if isinstance(ids, set | frozenset) else set(ids)
        with self._db:
            cursor = self._db.execute("SELECT id, queued_at, built_at FROM jobs WHERE state = ? AND owner IS NULL "
                                      "ORDER BY queued_at, id", (state.value,))
            rows: list[tuple[str, float, float | None]] = []
            while len(rows) < limit and (some := cursor.fetchmany(256)):  # the oldest first: stop once found
                rows += [r for r in some if allowed is None or r[0] in allowed][:limit - len(rows)]
            cursor.close()
            taken = []
            for ident, queued_at, built_at in rows:
                sets = "state = ?, owner = ?, lease_until = ?, updated_at = ?"
                values: list[object] = [to.value, self.owner, now + LEASE_SECONDS, _stamp()]
                if to is JobState.building:
                    sets += ", build_wait_s = ?"
                    values.append(now - queued_at)
                if to is JobState.running:
                    sets += ", attempts = attempts + 1, device = ?, run_wait_s = ?"
                    values += [device, now - (built_at or queued_at)]
                cur = self._db.execute(f"UPDATE jobs SET {sets} WHERE id = ? AND state = ? AND owner IS NULL",
                                       [*values, ident, state.value])
                if cur.rowcount == 1:
                    taken.append(ident)
        return self.jobs(taken)

    def built(self, ident: str, seconds: float | None, cached: bool | None) -> None:
        """building → built, unowned: any device worker may take it."""
        self._move(ident, JobState.building, JobState.built, build_s=seconds,
                   build_cached=None if cached is None else int(cached), built_at=time.time())

    def finish(self, ident: str, verdict: Verdict, held: JobState = JobState.running) -> int | None:
        """Record the verdict and move the job to done, in one transaction; the evaluation id, or
        None when this owner no longer holds the job (nothing is recorded then)."""
        with self._db:
            row = self._db.execute("SELECT state, owner FROM jobs WHERE id = ?", (ident,)).fetchone()
            if row is None or row[0] != held.value or row[1] != self.owner:
                return None
            evaluation_id = self.store.evaluations.insert(verdict)
            self._db.execute("UPDATE jobs SET state = ?, owner = NULL, lease_until = NULL, evaluation_id = ?, "
                             "status = ?, updated_at = ? WHERE id = ?",
                             (JobState.done.value, evaluation_id, verdict.status.value, _stamp(), ident))
        return evaluation_id

    def fail(self, ident: str, error: str) -> None:
        """No verdict could be made (the harness's own trouble, or a candidate that kept killing
        its worker): failed, with why."""
        with self._db:
            self._db.execute("UPDATE jobs SET state = ?, owner = NULL, lease_until = NULL, error = ?, updated_at = ? "
                             "WHERE id = ? AND owner = ?", (JobState.failed.value, error[:2000], _stamp(), ident,
                                                            self.owner))

    def release(self, ident: str, error: str | None = None, started: bool = True) -> JobState:
        """Give a held job back (its worker died): building → queued, running → built, or failed
        once it has used its attempts; `started` False when its evaluation never began (its
        attempt is taken back). The state it is left in."""
        job = self.get(ident)
        if job is None or job.owner != self.owner or job.state in FINAL:
            return job.state if job else JobState.failed
        if job.state is JobState.running and not started:
            self._move(ident, JobState.running, JobState.built, attempts=job.attempts - 1)
            return JobState.built
        if job.state is JobState.running and job.attempts >= MAX_ATTEMPTS:
            self.fail(ident, f"{job.attempts} evaluations of this candidate ended with their worker gone"
                      + (f"; the last: {error}" if error else ""))
            return JobState.failed
        back = JobState.queued if job.state is JobState.building else JobState.built
        self._move(ident, job.state, back, owner=None, lease_until=None, error=error)
        return back

    def renew(self) -> None:
        """Extend this owner's leases (called every few seconds while it works)."""
        with self._db:
            self._db.execute("UPDATE jobs SET lease_until = ? WHERE owner = ?", (time.time() + LEASE_SECONDS,
                                                                                 self.owner))

    def recover(self) -> int:
        """Hand back the jobs of owners that are gone (or whose leases ran out); how many."""
        now = time.time()
        rows = self._db.execute("SELECT id, state, owner, lease_until, attempts FROM jobs "
                                "WHERE owner IS NOT NULL").fetchall()
        handed = 0
        with self._db:
            for ident, state, owner, lease, attempts in rows:
                if owner == self.owner:
                    continue
                alive = owner_alive(owner)
                if alive or (alive is None and (lease or 0) > now):
                    continue
                back = JobState.queued if state == JobState.building.value else JobState.built
                error = None
                if state == JobState.running.value and attempts >= MAX_ATTEMPTS:
                    back, error = JobState.failed, f"{attempts} evaluations of this candidate were cut off"
                self._db.execute("UPDATE jobs SET state = ?, owner = NULL, lease_until = NULL, updated_at = ?, "
                                 "error = coalesce(?, error) WHERE id = ? AND owner = ?",
                                 (back.value, _stamp(), error, ident, owner))
                handed += 1
        return handed

    def _move(self, ident: str, held: JobState, to: JobState, **columns: object) -> None:
        columns = {"owner": None, "lease_until": None, **columns} if to not in (JobState.building,
                                                                                JobState.running) else columns
        sets = ", ".join(["state = ?", "updated_at = ?", *(f"{k} = ?" for k in columns)])
        with self._db:
            self._db.execute(f"UPDATE jobs SET {sets} WHERE id = ? AND state = ?",
                             (to.value, _stamp(), *columns.values(), ident, held.value))


def _stamp() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="milliseconds")

