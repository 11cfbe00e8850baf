"""Gemini CLI's own chat record (`~/.gemini/tmp/<project>/chats/session-*.json`; Harbor keeps it as
`gemini-cli.trajectory.json`): one JSON document, not lines.

`{sessionId, projectHash, startTime, lastUpdated, messages: [...]}`, each message `{id, timestamp,
type, content}` where type is `user`, `gemini` (the model: `thoughts` as subject and description,
`toolCalls` each with its `args`, `result` parts and `status`, `tokens`, `model`), `info`, `warning`
or `error`; `content` is text or a list of parts. A message's `tokens` are that model call's:
`input` the whole prompt, `cached` its cached part, `output` the answer, `thoughts` the reasoning
(billed as output: the event's output counts both).
The record has no closing entry, so `completed` is None; edits (write_file, replace) diff as in the
stream format (gemini.py). Events of the document carry no line number: a message's place is its index.

Newer CLIs (2026) write the same record as JSON lines instead: a header line (`sessionId`,
`projectHash`, `startTime`, `lastUpdated`, `kind`), then one line per message, with `{"$set": {...}}`
lines updating the header in between; a `$set` may carry messages too (the a2a server writes
them only so). A message written twice (one id) is read once, where it was first written, as it
was last written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder, count, items, mapping, string, text_of, total, when
from rooftop.transcripts.diffs import Files
from rooftop.transcripts.events import Role, Session, ToolResult
from rooftop.transcripts.lines import Record
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.parsers.gemini import tool_call
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "gemini_native"
PRIORITY = 60
NOTES: dict[str, Role] = {"info": "system", "warning": "system", "error": "error"}


def sniff(records: list[Any]) -> bool:
    return any(_document(r) or _header(r) for r in records)


def _document(r: Any) -> bool:
    return (isinstance(r, dict) and isinstance(r.get("messages"), list) and "sessionId" in r
            and ("projectHash" in r or "startTime" in r))


def _header(r: Any) -> bool:
    """The first line of the JSON-lines record."""
    return isinstance(r, dict) and "sessionId" in r and "projectHash" in r and "messages" not in r


def tokens(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    thoughts = count(value.get("thoughts"))  # billed as output, counted apart from it
    return Usage(input_tokens=count(value.get("input")), output_tokens=total(count(value.get("output")), thoughts),
                 cache_read_tokens=count(value.get("cached")), reasoning_tokens=thoughts)


def _result_text(call: dict[str, Any]) -> str:
    """A tool's output: its functionResponse's `output` (or `error`), else what the CLI displayed."""
    parts = []
    for part in items(call.get("result")):
        response = mapping(mapping(part, "functionResponse"), "response")
        if response:
            parts.append(text_of(response.get("output", response.get("error", response))))
        elif part is not None:
            parts.append(text_of(part))
    display = call.get("resultDisplay")
    return "\n".join(p for p in parts if p) or (display if isinstance(display, str) else text_of(display or ""))


def _thoughts(message: dict[str, Any]) -> str | None:
    lines = []
    for thought in items(message.get("thoughts")):
        if isinstance(thought, dict):
            parts = (string(thought.get("subject")), string(thought.get("description")))
            lines.append(": ".join(p for p in parts if p))
    return "\n\n".join(line for line in lines if line) or None


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    files = Files()
    subagent = False  # the record is a subagent's (its `kind`)
    lined: dict[Any, tuple[int, Any]] = {}  # the JSON-lines record's messages by id, in order: (line, message)
    for line, record in b.walk(records):
        if _header(record) or "$set" in record:
            update = record if _header(record) else mapping(record, "$set")
            _meta(s, update)
            subagent = subagent or update.get("kind") == "subagent"
            for message in items(update.get("messages")):  # messages written through `$set` too
                lined[_key(message, len(lined))] = (line, message)
            continue
        if "id" in record and "type" in record and "timestamp" in record:
            lined[_key(record, len(lined))] = (line, record)
            continue
        if not _document(record):  # neither a chat record nor a line of one: kept as it is
            b.raw(line, record, str(record.get("type") or ""))
            continue
        s.lines -= 1  # the document counts as its messages
        with b.guard(line, record):
            _meta(s, record)
            subagent = subagent or record.get("kind") == "subagent"
            for message in items(record.get("messages")):
                s.lines += 1
                _message(b, files, message)
    for line, message in lined.values():  # a message written again (same id) is read once, as last written
        with b.guard(line, message):
            _message(b, files, message, line)
    s.usage = usage_sum(e.usage for e in s.events)
    s.agent = "gemini-cli" + (" (a subagent's record)" if subagent else "")
    return b.finish()


def _key(message: Any, position: int) -> Any:
    return string(message.get("id")) if isinstance(message, dict) and string(message.get("id")) else position


def _meta(s: Session, record: dict[str, Any]) -> None:
    s.session_id = string(record.get("sessionId")) or s.session_id
    started = when(record.get("startTime"))
    s.started_at = min(started, s.started_at) if started and s.started_at else started or s.started_at
    last = when(record.get("lastUpdated"))
    if s.started_at is not None and last is not None:
        s.duration_s = round((last - s.started_at).total_seconds(), 3)


def _message(b: Builder, files: Files, message: Any, line: int | None = None) -> None:
    if not isinstance(message, dict):
        b.raw(line, message, "not-an-object")
        return
    kind = string(message.get("type")) or ""
    at = {"timestamp": when(message.get("timestamp"))}
    text = text_of(message.get("content")) or None
    if kind == "user":
        b.add(line, "user", kind, text=text, **at)
    elif kind == "gemini":
        model = string(message.get("model"))
        b.session.model = b.session.model or model
        calls = [c for c in items(message.get("toolCalls")) if isinstance(c, dict)]
        tool_calls = [tool_call({"tool_name": c.get("name"), "tool_id": c.get("id"), "parameters": c.get("args")},
                                files) for c in calls]
        b.add(line, "assistant", kind, text=text, reasoning=_thoughts(message), tool_calls=tool_calls,
              usage=tokens(message.get("tokens")), model=model, **at)
        for call in calls:
            failed = call.get("status") in ("error", "cancelled")
            result = ToolResult(call_id=string(call.get("id")), content=_result_text(call), is_error=failed)
            b.add(line, "tool", f"toolCall.{call.get('status') or ''}", tool_result=result,
                  timestamp=when(call.get("timestamp")))
    elif kind in NOTES:
        b.add(line, NOTES[kind], kind, text=text, **at)
    else:
        b.raw(line, message, kind)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse, document=True))
