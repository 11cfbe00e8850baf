"""One event model for every agent transcript format.

A parser turns each line (or record) of a transcript into zero or more `Event`s, in order. What it
does not understand it keeps: an event of role `raw` carrying the record as it was, never dropped.
A line that is not valid JSON becomes a `ParseProblem` with its line number, and parsing goes on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from rooftop.transcripts.usage import Usage

Role = Literal["system", "user", "assistant", "tool", "error", "result", "raw"]


class ToolCall(BaseModel):
    id: str | None = None
    name: str
    arguments: Any = None  # parsed JSON where the format gives JSON, else the text as sent
    file_path: str | None = None  # the file a write or edit touches
    diff: str | None = None  # a unified diff of that file's change, where one can be made
    subagent: bool = False  # this call starts a subagent (Claude's Agent/Task, opencode's task, ...)


class ToolResult(BaseModel):
    call_id: str | None = None
    content: str = ""
    is_error: bool = False


class Event(BaseModel):
    index: int = 0  # position in the session, set by the parser
    line: int | None = None  # 1-based line of the transcript it came from
    role: Role
    kind: str = ""  # the format's own name for the record (e.g. "assistant", "response_item.function_call")
    text: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = []
    tool_result: ToolResult | None = None
    usage: Usage | None = None  # this model call's, counted once (a repeated message id carries none)
    model: str | None = None
    timestamp: datetime | None = None
    parent: str | None = None  # the tool call id of the subagent call this event belongs to
    sidechain: bool = False
    raw: dict[str, Any] | list[Any] | str | None = None  # the record itself, for role "raw"


class ParseProblem(BaseModel):
    line: int
    message: str


class Session(BaseModel):
    """A whole transcript: its events and what the format says about the session."""

    format: str  # claude, claude_native, codex_rollout, codex_exec, opencode, kimi, cursor, gemini, rooftop
    path: str | None = None
    agent: str | None = None  # the CLI and its version where the transcript says
    model: str | None = None
    session_id: str | None = None
    cwd: str | None = None
    events: list[Event] = []
    problems: list[ParseProblem] = []
    lines: int = 0  # records read
    usage: Usage = Usage()  # the session's total
    cost_usd: float | None = None
    started_at: datetime | None = None
    duration_s: float | None = None
    completed: bool | None = None  # the format's own end-of-session record was seen (None: it has none)
    # the transcript's own count of turns and what it counts (Claude Code's result `num_turns`), shown
    # beside the model calls counted here, which may differ
    reported_turns: int | None = None
    reported_turns_label: str | None = None
    final_text: str | None = None
