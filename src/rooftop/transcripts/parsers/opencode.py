"""`opencode run --format json` stdout: `{type, timestamp (ms), sessionID, part}` lines.

`step_start` opens a model call and `step_finish` closes it with that step's tokens and cost (summed
for the session; the tokens go on the step's last assistant event); `text` is assistant text;
`tool_use` comes once the tool has finished and holds both the call and its outcome (`state`), so
it becomes an assistant event with the call and a tool event with the result, on the same line. An
edit's `metadata.diff` is already a unified diff; a write diffs its content against what the session
has shown of the file; a `task` call starts a subagent (whose own events are not streamed; its
session id is in the result's metadata). There is no prompt, no model and no closing record:
`completed` says whether the last step ended with reason `stop`.

Several runs appended to one file (several `sessionID`s in turn) all stay, in order; where a new
one starts, a system event of kind `session` marks it, on its first line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder, amount, count, items, mapping, string, text_of, total, when
from rooftop.transcripts.diffs import Files
from rooftop.transcripts.events import Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "opencode"
PRIORITY = 30
TYPES = {"step_start", "step_finish", "text", "tool_use", "reasoning", "error"}


def sniff(records: list[Any]) -> bool:
    return any(isinstance(r, dict) and string(r.get("type")) in TYPES and "sessionID" in r for r in records)


def step_usage(part: dict[str, Any]) -> Usage:
    """A step's tokens: opencode's `input` leaves out the cached part, ours includes it."""
    used = mapping(part, "tokens")
    cache = mapping(used, "cache")
    read, write = count(cache.get("read")), count(cache.get("write"))
    return Usage(input_tokens=total(count(used.get("input")), read, write), output_tokens=count(used.get("output")),
                 cache_read_tokens=read, cache_write_tokens=write, reasoning_tokens=count(used.get("reasoning")))


def _reasoning(part: dict[str, Any]) -> str | None:
    """Provider reasoning that rides on a part (OpenRouter's `reasoning_details`)."""
    details = mapping(mapping(part, "metadata"), "openrouter").get("reasoning_details")
    texts = [text_of(d.get("text")) for d in items(details)
             if isinstance(d, dict) and d.get("type") == "reasoning.text"]
    return "\n".join(t for t in texts if t) or None


def _call(part: dict[str, Any], files: Files) -> ToolCall:
    state = mapping(part, "state")
    args, meta = state.get("input"), mapping(state, "metadata")
    name = string(part.get("tool")) or "?"
    call = ToolCall(id=string(part.get("callID")), name=name, arguments=args, subagent=name == "task")
    path = string(mapping(state, "input").get("filePath"))
    if name in ("edit", "write", "patch", "multiedit") and path is not None:
        call.file_path = path
        after = mapping(meta, "filediff").get("after")
        if isinstance(meta.get("diff"), str):
            call.diff = meta["diff"]
            files.set(path, after if isinstance(after, str) else None)
        elif name == "write" and isinstance(mapping(state, "input").get("content"), str):
            call.diff = files.write(path, mapping(state, "input")["content"])
    return call


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    files = Files()
    sessions: list[str] = []
    last_reason: str | None = None
    step = 0  # the first event of the step under way
    cost = 0.0
    costed = False
    for line, record in b.walk(records):
        with b.guard(line, record):
            kind = record.get("type")
            part = mapping(record, "part")
            stamp = {"timestamp": when(record.get("timestamp"), 1e-3)}
            session = string(record.get("sessionID")) or string(part.get("sessionID"))
            if session is not None and session not in sessions:
                sessions.append(session)
                b.add(line, "system", "session", text=session, **stamp)
            if kind == "step_start":
                step = len(s.events)
                b.add(line, "system", kind, **stamp)
            elif kind == "step_finish":
                last_reason = string(part.get("reason"))
                spent = amount(part.get("cost"))
                if spent is not None:
                    cost, costed = cost + spent, True
                usage: Usage | None = step_usage(part)
                if b.charge(usage, step):
                    usage = None
                b.add(line, "system", kind, text=last_reason, usage=usage, **stamp)
                step = len(s.events)
            elif kind == "text":
                b.add(line, "assistant", kind, text=string(part.get("text")), reasoning=_reasoning(part), **stamp)
            elif kind == "reasoning":
                b.add(line, "assistant", kind, reasoning=string(part.get("text")), **stamp)
            elif kind == "tool_use":
                state = mapping(part, "state")
                call = _call(part, files)
                b.add(line, "assistant", kind, tool_calls=[call], reasoning=_reasoning(part), **stamp)
                failed = state.get("status") == "error"
                content = text_of(state.get("error") if failed else state.get("output"))
                result = ToolResult(call_id=call.id, content=content, is_error=failed)
                b.add(line, "tool", kind, tool_result=result, **stamp)
            elif kind == "error":
                error = mapping(record, "error")
                message = text_of(mapping(error, "data").get("message") or error.get("name") or error) or None
                b.add(line, "error", kind, text=message, **stamp)
            else:
                b.raw(line, record, str(kind or ""))
    s.session_id = sessions[0] if sessions else None
    s.usage = usage_sum(e.usage for e in s.events)
    s.cost_usd = round(cost, 10) if costed else None
    s.completed = last_reason == "stop" if last_reason is not None else None
    s.agent = "opencode"
    return b.finish()


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
