"""Kimi Code CLI's wire log (`~/.kimi/sessions/<hash>/<id>/wire.jsonl`).

A `{"type": "metadata", "protocol_version"}` line, then `{timestamp (s), message: {type, payload}}`:
`TurnBegin` (the user's input), `StepBegin`, `ContentPart` (a think or text part), `ToolCall`,
`ToolCallPart` (streamed arguments, redundant with the ToolCall: no text), `ToolResult` (with
`display` blocks, a `diff` block giving the change as old and new text), `StatusUpdate` (that step's
tokens: the only per-step usage any Kimi file has), approvals, `TurnEnd`.

Usage is the sum of the StatusUpdates, once per message id, each on its step's last assistant event.
The session completed when every
turn that began has ended.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rooftop.transcripts.build import Builder, arguments, count, items, mapping, string, text_of, total, when
from rooftop.transcripts.diffs import snippet
from rooftop.transcripts.events import Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "kimi_wire"
PRIORITY = 40


def sniff(records: list[Any]) -> bool:
    for r in records:
        if isinstance(r, dict) and r.get("type") == "metadata" and "protocol_version" in r:
            return True
        message = r.get("message") if isinstance(r, dict) else None
        if isinstance(message, dict) and "payload" in message and isinstance(r.get("timestamp"), int | float):
            return True
    return False


def step_usage(payload: dict[str, Any]) -> Usage | None:
    used = payload.get("token_usage")
    if not isinstance(used, dict):
        return None
    read, write = count(used.get("input_cache_read")), count(used.get("input_cache_creation"))
    return Usage(input_tokens=total(count(used.get("input_other")), read, write),
                 output_tokens=count(used.get("output")), cache_read_tokens=read, cache_write_tokens=write)


def display_diff(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """A tool result's `diff` display blocks as one unified diff, and the first file they touch."""
    blocks = [d for d in items(mapping(payload, "return_value").get("display"))
              if isinstance(d, dict) and d.get("type") == "diff" and isinstance(d.get("path"), str)]
    diffs = [snippet(d["path"], text_of(d.get("old_text")), text_of(d.get("new_text"))) for d in blocks]
    return (blocks[0]["path"], "".join(diffs)) if blocks else (None, None)


def task_of(payload: dict[str, Any]) -> str | None:
    """The id of the call that started a `SubagentEvent`'s subagent: `task_tool_call_id` (protocol
    1.x), `parent_tool_call_id` (newer CLIs, beside an `agent_id`)."""
    return string(payload.get("task_tool_call_id")) or string(payload.get("parent_tool_call_id"))


@dataclass
class Step:
    """One step of the wire log: its usage and the ids of the tool calls it made."""

    usage: Usage
    calls: set[str] = field(default_factory=set)


class Wire:
    """What a wire log adds to a context file: each step's usage and tool call ids, in order,
    diffs by tool call id, and each subagent's own steps by the id of the task call that started
    it (its `SubagentEvent`s carry its events whole)."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.diffs: dict[str, tuple[str | None, str | None]] = {}
        self.tasks: dict[str, Wire] = {}
        self.first: datetime | None = None  # the log's first and last timestamps
        self.last: datetime | None = None
        self._counted: set[str] = set()  # message ids whose usage is in `steps`
        self._calls: set[str] = set()  # the step under way's tool call ids

    def read(self, records: Iterable[Record]) -> Wire:
        for _, record in records:
            self.take(mapping(record, "message"))
            stamp = when(record.get("timestamp")) if isinstance(record, dict) else None
            if stamp is not None:
                self.first, self.last = self.first or stamp, stamp
        return self

    def take(self, message: dict[str, Any]) -> None:
        kind, payload = message.get("type"), mapping(message, "payload")
        if kind == "SubagentEvent":
            task = task_of(payload)
            if task:
                self.tasks.setdefault(task, Wire()).take(mapping(payload, "event"))
        elif kind == "StepBegin":
            self._calls = set()
        elif kind == "ToolCall" and string(payload.get("id")):
            self._calls.add(payload["id"])
        elif kind == "StatusUpdate" and (usage := step_usage(payload)) is not None:
            ident = string(payload.get("message_id")) or f"step-{len(self.steps)}"
            if ident not in self._counted:
                self._counted.add(ident)
                self.steps.append(Step(usage, self._calls))
            self._calls = set()
        elif kind == "ToolResult" and string(payload.get("tool_call_id")):
            self.diffs[payload["tool_call_id"]] = display_diff(payload)

    @property
    def usage(self) -> Usage:
        """Every step's usage, the subagents' included: what the session spent."""
        return usage_sum([*(step.usage for step in self.steps), *(task.usage for task in self.tasks.values())])


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    calls: dict[str, ToolCall] = {}
    counted: set[str] = set()
    turns = 0
    step = 0  # the first event of the step under way
    for line, record in b.walk(records):
        with b.guard(line, record):
            if record.get("type") == "metadata":
                s.agent = f"kimi (wire protocol {record.get('protocol_version')})"
                b.add(line, "system", "metadata")
                continue
            message = mapping(record, "message")
            kind, payload = string(message.get("type")) or "", mapping(message, "payload")
            at = {"timestamp": when(record.get("timestamp"))}
            if kind == "TurnBegin":
                turns += 1
                b.add(line, "user", kind, text=text_of(payload.get("user_input")) or None, **at)
            elif kind == "TurnEnd":
                turns -= 1
                b.add(line, "system", kind, **at)
            elif kind == "ContentPart":
                if payload.get("type") == "think":
                    b.add(line, "assistant", kind, reasoning=text_of(payload.get("think")), **at)
                else:
                    b.add(line, "assistant", kind, text=text_of(payload.get("text")), **at)
            elif kind == "ToolCall":
                function = mapping(payload, "function")
                call = ToolCall(id=string(payload.get("id")), name=string(function.get("name")) or "?",
                                arguments=arguments(function.get("arguments")), subagent=function.get("name") == "Task")
                if call.id:
                    calls[call.id] = call
                b.add(line, "assistant", kind, tool_calls=[call], **at)
            elif kind == "ToolResult":
                b.add(line, "tool", kind, tool_result=_result(payload, calls), **at)
            elif kind == "StatusUpdate":
                ident = string(payload.get("message_id"))
                fresh = ident is None or ident not in counted
                if ident is not None:
                    counted.add(ident)
                usage = step_usage(payload) if fresh else None
                if b.charge(usage, step):
                    usage = None
                b.add(line, "system", kind, usage=usage, **at)
                step = len(s.events)
            elif kind in ("StepBegin", "ToolCallPart", "ApprovalRequest", "ApprovalResponse"):
                step = len(s.events) if kind == "StepBegin" else step
                text = string(payload.get("description")) or string(payload.get("response"))
                b.add(line, "system", kind, text=text, **at)
            else:
                b.raw(line, record, kind)
    s.usage = usage_sum(e.usage for e in s.events)
    s.completed = turns == 0 if any(e.kind == "TurnBegin" for e in s.events) else None
    return b.finish()


def _result(payload: dict[str, Any], calls: dict[str, ToolCall]) -> ToolResult:
    """A tool's result; its `diff` display, the exact change, goes on the call that made it."""
    ident = string(payload.get("tool_call_id"))
    value = mapping(payload, "return_value")
    file_path, diff = display_diff(payload)
    if ident in calls and diff:
        calls[ident].file_path, calls[ident].diff = file_path, diff
    content = text_of(value.get("output")) or text_of(value.get("message"))
    return ToolResult(call_id=ident, content=content, is_error=value.get("is_error") is True)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
