"""Sessions of the HTTP server (`rooftop serve`): an episode document and its state, saved again
as the episode goes; idle ones are expired by their last save."""

from __future__ import annotations

import time

from pydantic import BaseModel

from rooftop.store.connection import Group, now, rows_as

SCHEMA = """
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
"""


class SessionRow(BaseModel):
    """A session as stored: its state and its episode document (JSON)."""

    state: str
    episode_json: str


class SessionStore(Group):
    def save(self, ident: str, task: str, state: str, episode_json: str) -> None:
        """Store a session's document and state. A session once `closed` or `expired` stays so: a
        tool call that was running when it was closed saves its turn, not its old state."""
        with self._db:
            self._db.execute("INSERT INTO sessions (id, created_at, updated_at, task, state, episode_json) "
                             "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                             "updated_at = excluded.updated_at, episode_json = excluded.episode_json, "
                             "state = CASE WHEN sessions.state IN ('closed', 'expired') THEN sessions.state "
                             "ELSE excluded.state END",
                             (ident, now(), time.time(), task, state, episode_json))

    def get(self, ident: str) -> SessionRow | None:
        found = rows_as(SessionRow, self._db.execute("SELECT state, episode_json FROM sessions WHERE id = ?", (ident,)))
        return found[0] if found else None

    def expire(self, idle_since: float) -> int:
        """Open sessions untouched since `idle_since` (epoch seconds) become expired; how many."""
        with self._db:
            cur = self._db.execute("UPDATE sessions SET state = 'expired' WHERE state = 'open' AND updated_at < ?",
                                   (idle_since,))
        return cur.rowcount
