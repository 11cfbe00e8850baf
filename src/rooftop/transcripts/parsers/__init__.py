"""One module per transcript format, so that a new format is one new file.

Each module (its name not starting with `_`) registers its `Parser` with `PARSERS.add` (rooftop/plugins.py), made of:

- `FORMAT: str`, the format's name;
- `PRIORITY: int`, the order sniffers are asked in (lower first), so that a format whose records
  look like another's but carry more is told apart first;
- `sniff(records: list[Any]) -> bool`, given a window of records (decoded JSON values, or
  `lines.Text` for lines that are not JSON), whether they are of this format;
- `parse(records: Iterable[tuple[int, Any]], path: str | None = None) -> Session`, the session of
  numbered records as `lines.records` yields them; it never raises on content;
- optionally `text=True`: a plain-text format, whose records are every line as `lines.Text`
  (`lines.texts`); or `document=True`: a format saved as one JSON document, whose records are
  that document alone, as line 1 (`lines.document`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rooftop.plugins import Registry
from rooftop.transcripts.events import Session
from rooftop.transcripts.lines import Record, document, records, texts


@dataclass(frozen=True)
class Parser:
    format: str
    priority: int
    sniff: Callable[[list[Any]], bool]
    parse: Callable[..., Session]
    text: bool = False  # the format is plain text: it reads every line's text, not decoded JSON
    document: bool = False  # the format is one JSON document: it reads the whole file as one record

    def __call__(self, records: Iterable[Record], path: str | None = None) -> Session:
        return self.parse(records, path)

    def read(self, path: str | Path) -> Session:
        """The session of the file at `path`, streamed (a document format's, read whole)."""
        if self.document:
            whole = document(path)
            return self.parse([(1, whole)] if whole is not None else records(path), str(path))
        return self.parse((texts if self.text else records)(path), str(path))


PARSERS: Registry[Parser] = Registry("transcript format", __name__)


def registry() -> dict[str, Parser]:
    """Every format's parser by name, in sniffing order."""
    return {p.format: p for p in sorted(PARSERS.values(), key=lambda p: (p.priority, p.format))}


def parser(format: str) -> Parser:
    """The parser of a format; KeyError naming the known ones if there is none."""
    return PARSERS[format]
