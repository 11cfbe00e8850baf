"""One module per transcript format, found by looking, so that a new format is one new file.

Each module (its name not starting with `_`) exposes:

- `FORMAT: str`, the format's name;
- `PRIORITY: int`, the order sniffers are asked in (lower first), so that a format whose records
  look like another's but carry more is told apart first;
- `sniff(records: list[Any]) -> bool`, given a window of records (decoded JSON values, or
  `lines.Text` for lines that are not JSON), whether they are of this format;
- `parse(records: Iterable[tuple[int, Any]], path: str | None = None) -> Session`, the session of
  numbered records as `lines.records` yields them; it never raises on content;
- optionally `TEXT = True`: a plain-text format, whose records are every line as `lines.Text`
  (`lines.texts`); or `DOCUMENT = True`: a format saved as one JSON document, whose records are
  that document alone, as line 1 (`lines.document`).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

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


@cache
def registry() -> dict[str, Parser]:
    """Every format's parser by name, in sniffing order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if all(hasattr(module, name) for name in ("FORMAT", "sniff", "parse")):
            found.append(Parser(module.FORMAT, getattr(module, "PRIORITY", 50), module.sniff, module.parse,
                                getattr(module, "TEXT", False), getattr(module, "DOCUMENT", False)))
    return {p.format: p for p in sorted(found, key=lambda p: (p.priority, p.format))}


def parser(format: str) -> Parser:
    """The parser of a format; KeyError naming the known ones if there is none."""
    parsers = registry()
    if format not in parsers:
        raise KeyError(f"no transcript format '{format}' (known: {', '.join(sorted(parsers))})")
    return parsers[format]
