"""What an agent run spent, as its transcript tells: the usage its run record keeps.

A session's `usage` counts tokens; a run's also says what it cost and how many model calls it made.
The agent adapters take it from here, from the session their format's parser read, so that each
agent's usage is counted once, by its parser, and the viewer and the run record agree.
"""

from __future__ import annotations

from rooftop.transcripts.events import Session
from rooftop.transcripts.usage import Usage


def spent(session: Session, turns: int | None = None) -> Usage:
    """The session's tokens, its cost, and `turns` (model calls, where the caller can tell them)."""
    return session.usage.model_copy(update={"cost_usd": session.cost_usd, "turns": turns})


def counted_calls(session: Session) -> int | None:
    """The model calls of a session: its events carrying a call's usage (None where it has none)."""
    return sum(1 for event in session.events if event.usage is not None) or None
