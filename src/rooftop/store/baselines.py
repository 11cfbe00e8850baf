"""Timed references and hardware profiles: what a verdict's speedups and roofline fractions are
measured against. Append-only; the newest row for a key wins."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from rooftop.store.connection import Group, now, rows_as

if TYPE_CHECKING:
    from rooftop.measure.baselines import BaselineRecord, Platform
    from rooftop.score.calibrate import HardwareProfile

SCHEMA = """
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
-- hardware_profiles: one row per `rooftop calibrate`; `BaselineStore.profile` reads the newest for a device.
CREATE TABLE IF NOT EXISTS hardware_profiles (
    id INTEGER PRIMARY KEY,  -- row id
    created_at TEXT NOT NULL,  -- when it was stored
    device_name TEXT NOT NULL,  -- the GPU's name
    profile_json TEXT NOT NULL  -- the profile: measured matmul and copy ceilings beside the datasheet,
    -- SMs, L2, memory, clocks, versions
);
CREATE INDEX IF NOT EXISTS baselines_by_key ON baselines(problem, problem_version, device_name, torch);
"""


class TimedBaseline(BaseModel):
    """A `baselines` row with a time, without its record: enough for a reader that never imports torch."""

    problem: str
    problem_version: int
    device: str
    device_name: str
    shape: str
    kind: str
    mode: str
    median_s: float


class BaselineStore(Group):
    def save(self, records: list[BaselineRecord]) -> None:
        """Append records, all of them or none."""
        with self._db:
            self._db.executemany(
                """INSERT INTO baselines (created_at, device, device_name, torch, triton, cuda, problem,
                   problem_version, shape, params, kind, mode, graphs, median_s, error, record_json)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [(now(), r.platform.device, r.platform.device_name, r.platform.torch, r.platform.triton,
                  r.platform.cuda, r.problem, r.problem_version, r.shape, r.params_key, r.kind, r.mode,
                  int(r.graphs), r.stats.median if r.stats else None, r.error, r.model_dump_json())
                 for r in records])

    def newest(self, platform: Platform, problem: str, version: int,
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

    def timed(self) -> list[TimedBaseline]:
        """Every row with a time, timed by events (not graphs), oldest first. Unlike `newest`, it
        needs no platform."""
        cursor = self._db.execute(
            "SELECT problem, problem_version, device, device_name, shape, kind, mode, median_s FROM baselines "
            "WHERE median_s IS NOT NULL AND graphs = 0 ORDER BY id")
        return rows_as(TimedBaseline, cursor)

    def save_profile(self, profile: HardwareProfile) -> None:
        with self._db:
            self._db.execute("INSERT INTO hardware_profiles (created_at, device_name, profile_json) VALUES (?, ?, ?)",
                             (now(), profile.device_name, profile.model_dump_json()))

    def profile(self, device_name: str) -> HardwareProfile | None:
        """The newest profile of a device."""
        from rooftop.score.calibrate import HardwareProfile

        row = self._db.execute("SELECT profile_json FROM hardware_profiles WHERE device_name = ? ORDER BY id DESC "
                               "LIMIT 1", (device_name,)).fetchone()
        return HardwareProfile.model_validate_json(row[0]) if row else None
