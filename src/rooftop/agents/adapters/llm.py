"""rooftop's own agent (`rooftop.agents.llm`) over any OpenAI-compatible endpoint.

It reads PROMPT.md from the workspace itself, so nothing goes on stdin; its stdout is rooftop's
own JSONL transcript, whose `result` event carries the usage totals. A run killed before that
event still has per-call usage on its assistant messages; the transcript parser sums them instead
(`rooftop.transcripts.parsers.rooftop.run_usage`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.agents.transcript import Event, ResultEvent, read_transcript
from rooftop.errors import UserError
from rooftop.transcripts.parsers import rooftop as own_transcript
from rooftop.transcripts.usage import Usage

MODULE = "rooftop.agents.llm"


def _events(transcript: Path) -> list[Event]:
    try:
        return read_transcript(transcript)
    except (OSError, ValueError):
        return []


def _result(events: list[Event]) -> ResultEvent | None:
    return next((e for e in reversed(events) if isinstance(e, ResultEvent)), None)


class LLMAdapter(Adapter):
    name = "llm"
    usage_origin = "counted"  # summed here from its per-call records
    executable = sys.executable
    key_env = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
    supports_max_turns = True

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        if not model:
            raise UserError("adapter llm: a model is required (the name the endpoint serves)")
        argv = [executable, "-m", MODULE, "--model", model]
        if max_turns is not None:
            argv += ["--max-turns", str(max_turns)]
        return Launch(argv=[*argv, *args])

    def version_argv(self, executable: str) -> list[str]:
        return [executable, "-m", MODULE, "--version"]

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        return own_transcript.run_usage(transcript)

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        result = _result(_events(transcript))
        return result is not None and (result.finished or result.reason == "max_turns")


ADAPTER = ADAPTERS.add(LLMAdapter.name, LLMAdapter())
