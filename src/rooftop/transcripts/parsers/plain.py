"""An agent's plain output (a `command` agent, or any CLI run without a JSON stream): each block of
lines, blank lines between blocks, is one assistant message, in the order it was printed.

Never sniffed: `detect.load` reads a file this way only when no format recognises it and most of
its lines are not JSON, and says so on the page (format `text`). A line that is a JSON value is
kept as a raw record.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder
from rooftop.transcripts.events import Session
from rooftop.transcripts.lines import Record, Text, decode
from rooftop.transcripts.parsers import PARSERS, Parser

FORMAT = "text"
PRIORITY = 99


def sniff(records: list[Any]) -> bool:
    return False


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    block: list[str] = []
    first = 0

    def flush() -> None:
        if block:
            b.add(first, "assistant", "output", text="\n".join(block))
            block.clear()

    for line, value in records:
        b.session.lines += 1
        text = value.raw if isinstance(value, Text) else str(value)
        if not text.strip():
            flush()
            continue
        decoded = decode(text.encode()) if text.lstrip()[:1] in "{[" else None
        if decoded is not None and not isinstance(decoded, Text):
            flush()
            b.raw(line, decoded, "json")
            continue
        if not block:
            first = line
        block.append(text)
    flush()
    return b.finish()


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse, text=True))
