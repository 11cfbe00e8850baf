"""Cursor Agent CLI (`cursor-agent`) in print mode with its stream-json output.

`--force` runs every tool call without asking and `--trust` trusts the workspace, which a
headless run cannot be asked about. The stream's terminal `result` line comes only on success;
newer versions put the session's tokens in its `usage` (camelCase, cached part apart from
`inputTokens`), older ones report none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch, Usage
from rooftop.agents.adapters.jsonl import count, last_of_type, mapping, total


def _result(transcript: Path) -> dict[str, Any] | None:
    return last_of_type(transcript, "result")


def _field(usage: dict[str, Any], *names: str) -> int | None:
    return next((count(usage[n]) for n in names if n in usage), None)


class CursorAdapter(Adapter):
    name = "cursor"
    executable = "cursor-agent"
    key_env = ("CURSOR_API_KEY",)
    endpoints = ("api2.cursor.sh:443",)

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        argv = [executable, "-p", "--output-format", "stream-json", "--force", "--trust", "--workspace", str(workspace)]
        if model:
            argv += ["--model", model]
        return Launch(argv=[*argv, *args, prompt])

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        result = _result(transcript)
        usage = mapping(result, "usage") if result is not None else {}
        if not usage:
            return Usage()
        read = _field(usage, "cacheReadTokens", "cache_read_tokens")
        write = _field(usage, "cacheWriteTokens", "cache_write_tokens")
        return Usage(input_tokens=total(_field(usage, "inputTokens", "input_tokens"), read, write),
                     output_tokens=_field(usage, "outputTokens", "output_tokens"),
                     cache_read_tokens=read, cache_write_tokens=write)

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        result = _result(transcript)
        return result is not None and result.get("is_error") is False


ADAPTER = ADAPTERS.add(CursorAdapter.name, CursorAdapter())
