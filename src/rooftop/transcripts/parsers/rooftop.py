"""rooftop's own agent transcript (`rooftop.agents.llm` stdout, written by
`rooftop.agents.transcript`): `start`, `message` (system, user, assistant with tool calls and that
call's usage, tool with its call id), `error` (fatal or retried) and `result` (the totals).

Read as plain JSON, not through the writer's models, so that a line those models would reject is
still shown. `run_kernel(code)` saves the code as solution.py: each call diffs against the code
the previous call saved (the first against an empty file). Session usage is the result's totals,
or the calls' usage summed where a killed session has no result; it completed when the model
finished or ran out of turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rooftop.transcripts.build import Builder, amount, arguments, count, items, mapping, string, text_of, when
from rooftop.transcripts.diffs import Files
from rooftop.transcripts.events import Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record, records
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.spent import spent
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "rooftop"
PRIORITY = 10
SOLUTION = "solution.py"


def sniff(records: list[Any]) -> bool:
    for r in records:
        if not isinstance(r, dict):
            continue
        if r.get("type") == "start" and "max_turns" in r and "version" in r:
            return True
        if r.get("type") == "result" and "wall_s" in r and "reason" in r:
            return True
        if r.get("type") == "message" and "role" in r and "time" in r and "tool_calls" in r:
            return True
    return False


def tokens(record: dict[str, Any]) -> Usage | None:
    """rooftop's own usage fields (`input_tokens` is the whole prompt, cached part included)."""
    usage = Usage(input_tokens=count(record.get("input_tokens")), output_tokens=count(record.get("output_tokens")),
                  cache_read_tokens=count(record.get("cache_read_tokens")),
                  reasoning_tokens=count(record.get("reasoning_tokens")))
    return usage if usage != Usage() else None


def _call(raw: Any, files: Files) -> ToolCall:
    raw = raw if isinstance(raw, dict) else {}
    name = string(raw.get("name")) or "?"
    args = arguments(raw.get("arguments"))
    call = ToolCall(id=string(raw.get("id")), name=name, arguments=args)
    if name == "run_kernel" and isinstance(args, dict) and isinstance(args.get("code"), str):
        call.file_path, call.diff = SOLUTION, files.write(SOLUTION, args["code"])
    return call


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    files = Files()
    result: dict[str, Any] | None = None
    for line, record in b.walk(records):
        with b.guard(line, record):
            kind = record.get("type")
            at = {"timestamp": when(record.get("time"))}
            if kind == "start":
                s.model = string(record.get("model"))
                s.agent = f"rooftop {record.get('version')}"
                b.add(line, "system", kind, text=f"tools: {', '.join(map(str, items(record.get('tools'))))}", **at)
            elif kind == "message":
                role = record.get("role")
                content = string(record.get("content"))
                if role == "assistant":
                    calls = [_call(c, files) for c in items(record.get("tool_calls"))]
                    b.add(line, "assistant", kind, text=content, reasoning=string(record.get("reasoning")),
                          tool_calls=calls, usage=tokens(mapping(record, "usage")), model=s.model, **at)
                elif role == "tool":
                    result_of = ToolResult(call_id=string(record.get("tool_call_id")), content=content or "")
                    b.add(line, "tool", kind, tool_result=result_of, **at)
                else:
                    b.add(line, "user" if role == "user" else "system", kind, text=content, **at)
            elif kind == "error":
                fatal = record.get("fatal") is not False
                b.add(line, "error", "error" if fatal else "error.retried", text=text_of(record.get("message")), **at)
            elif kind == "result":
                result = record
                b.add(line, "result", f"result.{record.get('reason')}", text=None, **at)
                s.duration_s = amount(record.get("wall_s"))
                s.completed = record.get("finished") is True or record.get("reason") == "max_turns"
                s.reported_turns = count(record.get("turns"))
                s.reported_turns_label = "turns in its result event"
            else:
                b.raw(line, record, str(kind or ""))
    s.usage = (tokens(result) if result is not None else None) or usage_sum(e.usage for e in s.events)
    return b.finish(closing_record=True)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))


def run_usage(transcript: Path) -> Usage:
    """A run's usage: its result event's totals and turns; a killed session's calls summed, each
    assistant message one model call."""
    session = parse(records(transcript), str(transcript))
    calls = sum(1 for event in session.events if event.role == "assistant")
    turns = session.reported_turns if session.reported_turns is not None else calls if session.events else None
    return spent(session, turns)
