"""The built-in agent's transcript: one JSON event per line on its stdout.

The runner keeps that stdout as the run's `transcript.jsonl`; the `llm` adapter reads it back for
usage and completion. Every line is flushed as it happens so a run killed at its budget still
leaves everything up to the kill, at worst with a cut-off last line, which `read_transcript` drops.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

from pydantic import BaseModel, Field, TypeAdapter, ValidationError, field_serializer

from rooftop.transcripts.usage import Usage


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# the usage figures a line carries: an OpenAI-compatible endpoint reports no cache writes and no cost
WRITTEN = {"input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens"}


class ToolCallRecord(BaseModel):
    id: str
    name: str
    arguments: str  # as the model sent it: JSON text, possibly malformed


class StartEvent(BaseModel):
    type: Literal["start"] = "start"
    version: str
    model: str
    base_url: str | None = None
    tools: list[str]
    max_turns: int
    time: str = Field(default_factory=now)


class MessageEvent(BaseModel):
    type: Literal["message"] = "message"
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    reasoning: str | None = None  # reasoning text, where the endpoint returns it beside the answer
    tool_calls: list[ToolCallRecord] = []
    tool_call_id: str | None = None  # role tool: the call this answers
    usage: Usage | None = None  # role assistant: this model call's tokens
    time: str = Field(default_factory=now)

    @field_serializer("usage")
    def _written(self, usage: Usage | None) -> dict[str, Any] | None:
        return usage.model_dump(include=WRITTEN) if usage is not None else None


class ErrorEvent(BaseModel):
    type: Literal["error"] = "error"
    message: str
    fatal: bool  # false: a transient failure that is retried
    status: int | None = None  # HTTP status where there was one
    time: str = Field(default_factory=now)


class ResultEvent(BaseModel):
    type: Literal["result"] = "result"
    finished: bool  # the model called finish
    reason: Literal["finish", "max_turns", "error", "no_tool_call"]
    turns: int  # model calls made
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None
    wall_s: float
    time: str = Field(default_factory=now)


Event = Annotated[StartEvent | MessageEvent | ErrorEvent | ResultEvent, Field(discriminator="type")]
_EVENT: TypeAdapter[Event] = TypeAdapter(Event)


class TranscriptWriter:
    """Writes events to a stream, one line each, flushed at once."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def emit(self, event: BaseModel) -> None:
        self.stream.write(event.model_dump_json() + "\n")
        self.stream.flush()


def read_transcript(path: str | Path) -> list[Event]:
    """Events of a transcript. A last line that does not parse is a write cut off by a kill and is
    dropped; a bad line anywhere else is a ValueError naming it."""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    events: list[Event] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(_EVENT.validate_python(json.loads(line)))
        except (json.JSONDecodeError, ValidationError) as exc:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a transcript event ({str(exc).splitlines()[0]})") from None
    return events
