"""Cursor Agent CLI (`cursor-agent`) in print mode with its stream-json output.

`--force` runs every tool call without asking and `--trust` trusts the workspace, which a
headless run cannot be asked about. The stream's terminal `result` line comes only on success;
newer versions put the session's tokens in its `usage` (camelCase, cached part apart from
`inputTokens`), which the transcript parser reads; older ones report none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.agents.adapters.jsonl import last_of_type
from rooftop.transcripts.parsers import parser
from rooftop.transcripts.spent import spent
from rooftop.transcripts.usage import Usage


def _result(transcript: Path) -> dict[str, Any] | None:
    return last_of_type(transcript, "result")


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
        return spent(parser("cursor").read(transcript))

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        result = _result(transcript)
        return result is not None and result.get("is_error") is False


ADAPTER = ADAPTERS.add(CursorAdapter.name, CursorAdapter())
