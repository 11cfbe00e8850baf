"""Gemini CLI (`gemini`) in headless mode with its stream-json output.

The prompt is given as `--prompt=<text>`, one argument: Gemini's parser reads a separate value
that starts with `-` as an option and stops. `--yolo` approves every tool call and `--skip-trust`
trusts the workspace for the session: in a folder it does not trust, Gemini refuses to run headless
or turns YOLO mode back off.

The terminal `result` event carries the session's `stats`: `input_tokens` (the whole prompt),
`cached` (its cached part) and `output_tokens`, read by the transcript parser; `status` is
`success` or `error`.
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


class GeminiAdapter(Adapter):
    name = "gemini"
    executable = "gemini"
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    endpoints = ("generativelanguage.googleapis.com:443",)

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        argv = [executable, f"--prompt={prompt}", "--output-format", "stream-json", "--yolo", "--skip-trust"]
        if model:
            argv += ["-m", model]
        return Launch(argv=[*argv, *args])

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        return spent(parser("gemini").read(transcript))

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        result = _result(transcript)
        return exit_code == 0 and result is not None and result.get("status") == "success"


ADAPTER = ADAPTERS.add(GeminiAdapter.name, GeminiAdapter())
