"""Reading what agent CLIs leave behind: JSON-lines files, streamed, never trusted.

A killed agent leaves a cut-off last line, and CLIs interleave the odd line that is not JSON (a
warning, a progress note), so every reader here skips what does not parse instead of failing the
run's record. Usage is not read here: the transcript parsers count it (`rooftop.transcripts`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rooftop.transcripts.build import mapping

# the safe reader of nested records is the transcripts package's; adapters take it from here
__all__ = ["last_of_type", "last_value", "mapping", "objects", "values"]


def values(path: Path) -> Iterator[Any]:
    """Every line of `path` that parses as JSON, in order; a missing or unreadable file has none."""
    try:
        with path.open("rb") as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError:  # malformed, cut off, or not UTF-8
                    continue
    except OSError:
        return


def objects(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects among `values(path)`: what every CLI's event stream is made of."""
    return (value for value in values(path) if isinstance(value, dict))


def last_of_type(path: Path, kind: str) -> dict[str, Any] | None:
    """The last object whose `type` is `kind` (a CLI's closing `result` line), or None."""
    last = None
    for record in objects(path):
        if record.get("type") == kind:
            last = record
    return last


def last_value(path: Path) -> Any:
    last = None
    for value in values(path):
        last = value
    return last
