"""Reading a transcript one line at a time, whatever it holds.

Agent CLIs get killed mid-write, interleave the odd warning with their JSON, and write single lines
of many megabytes, so a file is streamed line by line and a line that is not JSON is handed on as
`Text` (with why) rather than dropped: each parser turns it into a `ParseProblem` at its line, or,
for a text format, reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Text:
    """A line that is not JSON: its text and why it did not decode."""

    raw: str
    error: str


Record = tuple[int, Any]  # (1-based line number, the decoded JSON value or a Text)


def decode(raw: bytes, cut: bool = False) -> Any:
    """One line's JSON value, or a Text saying what is wrong with it (`cut`: the file ends inside it)."""
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        why = "cut off (the file ends inside this line)" if cut else "not JSON"
        return Text(text, f"{why}: {exc.msg} at column {exc.colno}")
    except ValueError as exc:  # e.g. a number too long to convert
        return Text(text, f"not JSON: {exc}")


def records(path: str | Path) -> Iterator[Record]:
    """Every non-blank line of `path` with its number, decoded; an unreadable file has none."""
    try:
        with Path(path).open("rb") as stream:
            for number, raw in enumerate(stream, 1):
                if raw.strip():
                    yield number, decode(raw, cut=not raw.endswith(b"\n"))
    except OSError:
        return


def texts(path: str | Path) -> Iterator[Record]:
    """Every line of `path` as Text, blank ones too: what a plain-text format is read from."""
    try:
        with Path(path).open("rb") as stream:
            for number, raw in enumerate(stream, 1):
                yield number, Text(raw.decode("utf-8", errors="replace").rstrip("\r\n"), "")
    except OSError:
        return


def head(path: str | Path, limit: int) -> list[Record]:
    """The first `limit` records of `path`, for telling its format."""
    out: list[Record] = []
    for record in records(path):
        out.append(record)
        if len(out) >= limit:
            break
    return out


DOCUMENT_BYTES = 64 << 20  # a transcript saved as one JSON document is read whole, up to this size


def document(path: str | Path) -> Any:
    """The JSON value of a file that is one (pretty-printed) JSON document, else None: what a
    format saved as a whole file (Gemini CLI's chat record) is read from."""
    try:
        with Path(path).open("rb") as stream:
            data = stream.read(DOCUMENT_BYTES + 1)
    except OSError:
        return None
    if len(data) > DOCUMENT_BYTES or data.lstrip()[:1] not in (b"{", b"["):
        return None
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except ValueError:
        return None
