"""Reading what agent CLIs leave behind: JSON-lines files, streamed, never trusted.

A killed agent leaves a cut-off last line, and CLIs interleave the odd line that is not JSON (a
warning, a progress note), so every reader here skips what does not parse instead of failing the
run's record. Token counts follow one convention across adapters, the one the `llm` adapter uses:
`input_tokens` is the whole prompt, cached part included, and `cache_read_tokens` /
`cache_write_tokens` say how much of it was read from / written to the provider's cache.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rooftop.agents.adapters.base import Usage
from rooftop.transcripts.build import amount, count, mapping, total

# the safe readers of reported figures are the transcripts package's; adapters take them from here
__all__ = ["add", "amount", "count", "last_of_type", "last_value", "mapping", "objects", "total", "values"]

_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


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








def add(usages: Iterable[Usage]) -> Usage:
    """Field-wise sum, keeping None only where no part reported the field."""
    out = Usage()
    for usage in usages:
        for field in (*_TOKEN_FIELDS, "turns"):
            setattr(out, field, total(getattr(out, field), getattr(usage, field)))
        if usage.cost_usd is not None:
            out.cost_usd = (out.cost_usd or 0.0) + usage.cost_usd
    return out

