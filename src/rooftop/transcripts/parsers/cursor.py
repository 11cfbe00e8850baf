"""Cursor Agent's print-mode stream (`cursor-agent -p --output-format stream-json`).

Lines: `system` (init: session, model, cwd), `user` (the prompt), `assistant` (a whole message
between tool calls; with `--stream-partial-output`, fragments), `thinking` (`delta` fragments, then
`completed`), `tool_call` (`started`, then `completed` with the result) wrapping one
`{"<name>ToolCall": {"args", "result"}}`, and `result` (final text, duration, and in newer versions
the session's `usage`). Lines look like Claude Code's but carry no `uuid` and no
`parent_tool_use_id`, which is how the two are told apart.

Consecutive thinking fragments merge into one event (at the first fragment's line): a fragment
per event would bury the session in slivers. Edits carry a diff from the result's full before and
after content where given, else from the written content and what the session has shown of the file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder, amount, count, mapping, string, text_of, total, when
from rooftop.transcripts.diffs import Files, unified
from rooftop.transcripts.events import Event, Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.usage import Usage

FORMAT = "cursor"
PRIORITY = 80
EDITS = {"editToolCall", "writeToolCall", "deleteToolCall"}


def sniff(records: list[Any]) -> bool:
    for r in records:
        if not isinstance(r, dict) or "uuid" in r or "parent_tool_use_id" in r:
            continue
        if r.get("type") in ("tool_call", "thinking") and "subtype" in r:
            return True
        if r.get("type") in ("system", "user", "assistant", "result") and ("model_call_id" in r or "timestamp_ms" in r):
            return True
        if r.get("type") == "system" and r.get("subtype") == "init" and "apiKeySource" in r and "tools" not in r:
            return True
    return False


def usage_of(usage: dict[str, Any]) -> Usage | None:
    """Cursor's camelCase usage; its `inputTokens` leaves out the cached part, ours includes it."""
    if not usage:
        return None

    def field(*names: str) -> int | None:
        return next((count(usage[n]) for n in names if n in usage), None)

    read, write = field("cacheReadTokens", "cache_read_tokens"), field("cacheWriteTokens", "cache_write_tokens")
    return Usage(input_tokens=total(field("inputTokens", "input_tokens"), read, write),
                 output_tokens=field("outputTokens", "output_tokens"), cache_read_tokens=read, cache_write_tokens=write)


def _unwrap(record: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The wrapped tool's key (e.g. `readToolCall`) and body; a plain function call is `function`."""
    wrapper = mapping(record, "tool_call")
    for key, body in wrapper.items():
        if isinstance(body, dict):
            return key, body
    return "tool_call", {}


def _call(ident: str | None, key: str, body: dict[str, Any], files: Files) -> ToolCall:
    args = body.get("args") if "args" in body else body.get("arguments")
    name = key.removesuffix("ToolCall") if key != "function" else string(body.get("name")) or "function"
    call = ToolCall(id=ident, name=name, arguments=args, subagent=key == "taskToolCall")
    path = string(mapping(body, "args").get("path"))
    if key in EDITS and path is not None:
        call.file_path = path
        written = mapping(body, "args").get("fileText", mapping(body, "args").get("streamContent"))
        if key == "deleteToolCall":
            before = files.get(path)
            files.set(path, None)
            call.diff = unified(path, before, None) if before is not None else None
        elif isinstance(written, str):
            call.diff = files.write(path, written)
    return call


def _finish(call: ToolCall, body: dict[str, Any], files: Files) -> ToolResult:
    """A completed call's result; an edit's full before/after content gives its exact diff."""
    result = mapping(body, "result")
    success = mapping(result, "success")
    failed = not success and bool(result)
    if call.file_path and success:
        before, after = success.get("beforeFullFileContent"), success.get("afterFullFileContent")
        if isinstance(after, str):
            call.diff = unified(call.file_path, before if isinstance(before, str) else files.get(call.file_path), after)
            files.set(call.file_path, after)
    if success:
        keys = ("content", "stdout", "stderr", "output", "message")
        parts = [text_of(success.get(k)) for k in keys if success.get(k)]
        content = "\n".join(parts) or text_of(success)
    else:
        content = text_of(next(iter(result.values()), "")) if result else ""
    code = success.get("exitCode")
    return ToolResult(call_id=call.id, content=content, is_error=failed or (isinstance(code, int) and code != 0))


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    files = Files()
    calls: dict[str, ToolCall] = {}
    thinking: Event | None = None
    for line, record in b.walk(records):
        with b.guard(line, record):
            kind, subtype = record.get("type"), string(record.get("subtype")) or ""
            at = {"timestamp": when(record.get("timestamp_ms"), 1e-3)}
            s.session_id = s.session_id or string(record.get("session_id"))
            if kind == "thinking":
                fragment = string(record.get("text")) or ""
                if thinking is not None:
                    thinking.reasoning = (thinking.reasoning or "") + fragment
                else:
                    thinking = b.add(line, "assistant", "thinking", reasoning=fragment, **at)
                if subtype == "completed":
                    thinking = None
                continue
            thinking = None
            if kind == "system":
                if subtype == "init":
                    s.model, s.cwd = string(record.get("model")), string(record.get("cwd"))
                b.add(line, "system", f"system.{subtype}", **at)
            elif kind == "user":
                b.add(line, "user", "user", text=text_of(mapping(record, "message").get("content")) or None, **at)
            elif kind == "assistant":
                b.add(line, "assistant", "assistant", text=text_of(mapping(record, "message").get("content")) or None,
                      model=s.model, **at)
            elif kind == "tool_call":
                ident = string(record.get("call_id"))
                key, body = _unwrap(record)
                call = calls.get(ident or "")
                if call is None or subtype == "started":
                    call = _call(ident, key, body, files)
                    if ident:
                        calls[ident] = call
                    b.add(line, "assistant", f"tool_call.{subtype}", tool_calls=[call], **at)
                if subtype == "completed":
                    b.add(line, "tool", f"tool_call.{subtype}", tool_result=_finish(call, body, files), **at)
            elif kind == "result":
                b.add(line, "result", f"result.{subtype}", text=string(record.get("result")), **at)
                s.usage = usage_of(mapping(record, "usage")) or Usage()
                duration = amount(record.get("duration_ms"))
                s.duration_s = duration / 1000 if duration is not None else None
                s.completed = record.get("is_error") is False
                s.final_text = string(record.get("result"))
            else:
                b.raw(line, record, str(kind or ""))
    s.agent = "cursor-agent"
    return b.finish(closing_record=True)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
