"""Gemini CLI's headless stream (`gemini -p ... --output-format stream-json`).

Lines: `init` (session id, model), `message` (role user or assistant; assistant text comes as
`delta` fragments), `tool_use` (tool_name, tool_id, parameters), `tool_result` (tool_id, status
success or error, output or error), `error` (severity, message) and `result` (status, and `stats`
summed over models: input_tokens, the whole prompt; cached, its cached part; output_tokens).

Consecutive assistant fragments merge into one event, at the first fragment's line. Edits
(write_file, replace) carry a diff from their parameters and what the session has shown of the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder, amount, count, mapping, string, text_of, when
from rooftop.transcripts.diffs import Files
from rooftop.transcripts.events import Event, Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.usage import Usage

FORMAT = "gemini"
PRIORITY = 60


def sniff(records: list[Any]) -> bool:
    for r in records:
        if not isinstance(r, dict) or "sessionID" in r or "part" in r:
            continue
        if r.get("type") == "init" and "session_id" in r and "model" in r:
            return True
        if r.get("type") in ("tool_use", "tool_result") and "tool_id" in r:
            return True
        if r.get("type") == "message" and r.get("role") in ("user", "assistant") and "timestamp" in r:
            return True
    return False


def stats_usage(stats: dict[str, Any]) -> Usage:
    return Usage(input_tokens=count(stats.get("input_tokens")), output_tokens=count(stats.get("output_tokens")),
                 cache_read_tokens=count(stats.get("cached")))


def tool_call(record: dict[str, Any], files: Files) -> ToolCall:
    params = mapping(record, "parameters")
    name = string(record.get("tool_name")) or "?"
    call = ToolCall(id=string(record.get("tool_id")), name=name, arguments=record.get("parameters"))
    path = string(params.get("file_path")) or string(params.get("absolute_path"))
    if path is None:
        return call
    if name == "write_file" and isinstance(params.get("content"), str):
        call.file_path, call.diff = path, files.write(path, params["content"])
    elif name in ("replace", "edit"):
        old, new = params.get("old_string"), params.get("new_string")
        if isinstance(old, str) and isinstance(new, str):
            every = params.get("expected_replacements") not in (None, 1)
            call.file_path, call.diff = path, files.edit(path, [(old, new, every)])
    return call


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    files = Files()
    speaking: Event | None = None
    for line, record in b.walk(records):
        with b.guard(line, record):
            kind = record.get("type")
            at = {"timestamp": when(record.get("timestamp"))}
            if kind == "message" and record.get("role") == "assistant":
                fragment = text_of(record.get("content"))
                if speaking is not None and record.get("delta") is True:
                    speaking.text = (speaking.text or "") + fragment
                else:
                    speaking = b.add(line, "assistant", "message", text=fragment, model=s.model, **at)
                if record.get("delta") is not True:
                    speaking = None
                continue
            speaking = None
            if kind == "init":
                s.session_id, s.model = string(record.get("session_id")), string(record.get("model"))
                b.add(line, "system", "init", **at)
            elif kind == "message":
                b.add(line, "user" if record.get("role") == "user" else "system", "message",
                      text=text_of(record.get("content")) or None, **at)
            elif kind == "tool_use":
                b.add(line, "assistant", kind, tool_calls=[tool_call(record, files)], **at)
            elif kind == "tool_result":
                failed = record.get("status") == "error"
                content = text_of(mapping(record, "error").get("message") if failed else record.get("output"))
                result = ToolResult(call_id=string(record.get("tool_id")), content=content, is_error=failed)
                b.add(line, "tool", kind, tool_result=result, **at)
            elif kind == "error":
                b.add(line, "error" if record.get("severity") != "warning" else "system", kind,
                      text=string(record.get("message")), **at)
            elif kind == "result":
                stats = mapping(record, "stats")
                failed = record.get("status") != "success"
                error = text_of(mapping(record, "error").get("message")) if failed else ""
                b.add(line, "result", f"result.{record.get('status')}", text=error or None, **at)
                s.usage = stats_usage(stats)
                duration = amount(stats.get("duration_ms"))
                s.duration_s = duration / 1000 if duration is not None else s.duration_s
                s.completed = not failed
            else:
                b.raw(line, record, str(kind or ""))
    s.agent = "gemini-cli"
    return b.finish(closing_record=True)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
