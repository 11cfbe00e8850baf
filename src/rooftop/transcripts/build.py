"""What every parser needs: a session being built, and safe readers for values no CLI promises.

Each parser walks its records and hands events to a `Builder`, which numbers them, turns lines
that were not JSON into problems, and keeps unknown records as `raw` events, so the rule that no
record is ever dropped holds in one place instead of in every format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from rooftop.transcripts.events import Event, ParseProblem, Role, Session
from rooftop.transcripts.lines import Record, Text
from rooftop.transcripts.usage import Usage


class Builder:
    """A session under construction; `session` is the result once the records are walked."""

    def __init__(self, format: str, path: str | None) -> None:
        self.session = Session(format=format, path=path)

    def add(self, line: int | None, role: Role, kind: str = "", **fields: Any) -> Event:
        event = Event(index=len(self.session.events), line=line, role=role, kind=kind, **fields)
        self.session.events.append(event)
        return event

    def raw(self, line: int | None, record: Any, kind: str = "") -> Event:
        """A record this parser does not understand, kept whole."""
        return self.add(line, "raw", kind, raw=record if isinstance(record, dict | list | str) else repr(record))

    def problem(self, line: int, message: str) -> None:
        self.session.problems.append(ParseProblem(line=line, message=message))

    def charge(self, usage: Usage | None, since: int, prefix: str = "") -> bool:
        """Puts a model call's usage, reported after the fact, on that call's last assistant event
        (one at `since` or later, of a kind starting with `prefix`), where the contract wants it;
        False if the call left no such event (or the event already has usage)."""
        for event in reversed(self.session.events[since:]):
            if event.role == "assistant" and event.kind.startswith(prefix) and not event.sidechain:
                if event.usage is not None or usage is None:
                    return False
                event.usage = usage
                return True
        return False

    @contextmanager
    def guard(self, line: int, record: Any) -> Iterator[None]:
        """Reading one record: a shape its parser did not expect costs that record (a problem at its
        line, and the record kept raw), never the session."""
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - any surprise in one record's content
            self.problem(line, f"record not understood ({type(exc).__name__}: {exc})")
            self.raw(line, record, "not-understood")

    def walk(self, records: Iterable[Record]) -> Iterable[tuple[int, dict[str, Any]]]:
        """The JSON objects among `records`; lines that are not JSON become problems, JSON that is not
        an object becomes a raw event, and every record counts in `session.lines`."""
        for line, value in records:
            self.session.lines += 1
            if isinstance(value, Text):
                self.problem(line, value.error)
            elif not isinstance(value, dict):
                self.raw(line, value, "not-an-object")
            else:
                yield line, value

    def finish(self, closing_record: bool = False) -> Session:
        """Fills what can be told from the events themselves, where the format did not say it.
        `closing_record`: the format ends a session with a record of its own that sets `completed`;
        a session with events but without that record was cut short, so it did not complete."""
        session = self.session
        if closing_record and session.completed is None and session.events:
            session.completed = False
        stamps = [e.timestamp for e in session.events if e.timestamp is not None]
        if session.started_at is None and stamps:
            session.started_at = stamps[0]
        if session.duration_s is None and len(stamps) > 1:
            session.duration_s = round((max(stamps) - min(stamps)).total_seconds(), 3)
        if session.final_text is None:
            session.final_text = next((e.text for e in reversed(session.events)
                                       if e.role == "assistant" and e.text and not e.sidechain), None)
        return session


def mapping(value: Any, key: str) -> dict[str, Any]:
    """`value[key]` where both are objects, else an empty object: for walking nested records safely."""
    inner = value.get(key) if isinstance(value, dict) else None
    return inner if isinstance(inner, dict) else {}


def items(value: Any) -> list[Any]:
    """`value` where it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def count(value: Any) -> int | None:
    """A token count as reported, or None where it is absent or not a count."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def amount(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def total(*parts: int | None) -> int | None:
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


def when(value: Any, unit: float = 1.0) -> datetime | None:
    """A timestamp: ISO text, or a number of `unit` seconds since the epoch (1e-3 for milliseconds)."""
    if isinstance(value, str) and value:
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        try:
            return datetime.fromtimestamp(value * unit, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def text_of(value: Any) -> str:
    """Readable text of a message or tool output, whichever shape the CLI gave it: a string, a list of
    content parts, or an object with a `text`; images and other parts are named, not dropped."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(part for part in (text_of(item) for item in value) if part)
    if isinstance(value, dict):
        for key in ("text", "think", "thinking", "content", "output"):
            if isinstance(value.get(key), str | list):
                return text_of(value[key])
        kind = value.get("type")
        if isinstance(kind, str) and "image" in kind:
            return "[image]"
        if kind == "tool_reference" and isinstance(value.get("tool_name"), str):
            return f"[tool {value['tool_name']}]"
    return json.dumps(value, ensure_ascii=False)


def arguments(value: Any) -> Any:
    """Tool arguments as parsed JSON where they are JSON text, else as sent."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
