"""Claude Code's print-mode stream (`claude -p --output-format stream-json --verbose`).

Lines are `system` (init, hooks, retries, subagent tasks, thinking-token estimates...), `assistant`
(one content block per line), `user` (tool results, with `tool_use_result` extras), `result` and,
with partial messages on, `stream_event` (raw SSE, redundant with the full lines: kept as system
events without text). A line carrying `parent_tool_use_id` was written by the subagent that call
started: its event gets that call's id as `parent` and `sidechain`.

Session usage: the `result` line's `modelUsage` summed over models, which counts subagents and
matches `total_cost_usd`; its `usage` counts the main thread only. Without a result line that
carries either (a killed session), the per-message usage stands in, counted once per message id.
`run_usage` is what the `claude` adapter records for a run: the same, with the cost and turns, and
for a killed session each call's final figures from Claude Code's own session files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rooftop.transcripts.build import Builder, amount, count, mapping, string, text_of, total, when
from rooftop.transcripts.events import Role, Session
from rooftop.transcripts.lines import Record, records
from rooftop.transcripts.parsers import PARSERS, Parser, _anthropic, claude_native
from rooftop.transcripts.spent import spent
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "claude"
PRIORITY = 90  # after cursor, whose lines look alike but lack `uuid` and `parent_tool_use_id`
TYPES = {"system", "assistant", "user", "result", "stream_event"}


def sniff(records: list[Any]) -> bool:
    for record in records:
        if not isinstance(record, dict) or string(record.get("type")) not in TYPES:
            continue
        if "claude_code_version" in record or "parent_tool_use_id" in record:
            return True
        if "session_id" in record and "uuid" in record:
            return True
    return False


def model_usage(result: dict[str, Any]) -> Usage | None:
    """The result's per-model totals summed (camelCase; cached parts apart from `inputTokens`)."""
    models = mapping(result, "modelUsage")
    usages = []
    for usage in models.values():
        if not isinstance(usage, dict):
            continue
        read, write = count(usage.get("cacheReadInputTokens")), count(usage.get("cacheCreationInputTokens"))
        usages.append(Usage(input_tokens=total(count(usage.get("inputTokens")), read, write),
                            output_tokens=count(usage.get("outputTokens")), cache_read_tokens=read,
                            cache_write_tokens=write))
    return usage_sum(usages) if usages else None


def _system_text(record: dict[str, Any]) -> str | None:
    subtype = record.get("subtype")
    if subtype == "api_retry":
        return (f"API retry {record.get('attempt')}/{record.get('max_retries')}: "
                f"{record.get('error_status') or ''} {text_of(record.get('error'))}").strip()
    if subtype in ("hook_started", "hook_response"):
        out = " ".join(p for p in (string(record.get("hook_name")), string(record.get("output"))) if p)
        return out or None
    if subtype == "compact_boundary":
        return "context compacted"
    for key in ("text", "summary", "description", "message"):
        if isinstance(record.get(key), str) and record[key]:
            return str(record[key])
    return None


KNOWN_SYSTEM = {"init", "api_retry", "hook_started", "hook_response", "notification", "thinking_tokens",
                "task_started", "task_progress", "task_notification", "compact_boundary"}


def totals(result: dict[str, Any]) -> Usage | None:
    """The session's totals in its result line; None where the line carries none."""
    if not isinstance(result.get("usage"), dict) and not isinstance(result.get("modelUsage"), dict):
        return None
    return model_usage(result) or _anthropic.tokens(result.get("usage")) or Usage()


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    return _read(records, path, _anthropic.Calls())[0]


def _read(records: Iterable[Record], path: str | None, calls: _anthropic.Calls) -> tuple[Session, bool]:
    """The session, its calls gathered in `calls`, and whether its result line gave its totals."""
    b = Builder(FORMAT, path)
    s = b.session
    result: dict[str, Any] | None = None
    for line, record in b.walk(records):
        with b.guard(line, record):
            kind = record.get("type")
            parent = string(record.get("parent_tool_use_id"))
            side = {"parent": parent, "sidechain": parent is not None, "timestamp": when(record.get("timestamp"))}
            s.session_id = s.session_id or string(record.get("session_id"))
            if kind == "system":
                subtype = string(record.get("subtype")) or ""
                if subtype == "init":
                    s.cwd, s.model = string(record.get("cwd")), string(record.get("model"))
                    version = string(record.get("claude_code_version"))
                    s.agent = f"claude-code {version}" if version else "claude-code"
                task_call = string(record.get("tool_use_id"))
                call = calls.by_id.get(task_call) if task_call else None
                agent = call is not None and call.subagent or record.get("task_type") == "local_agent"
                if subtype.startswith("task_") and agent:
                    side["parent"] = task_call
                role: Role = "error" if subtype == "api_retry" else "system"
                b.add(line, role, f"system.{subtype}", text=_system_text(record),
                      raw=None if subtype in KNOWN_SYSTEM else record, **side)
            elif kind == "assistant":
                message = mapping(record, "message")
                event = _anthropic.assistant(b, line, message, calls, **side)
                if s.model is None and event.model not in (None, _anthropic.SYNTHETIC_MODEL):
                    s.model = event.model
            elif kind == "user":
                _anthropic.user(b, line, mapping(record, "message"), record.get("tool_use_result"), calls, **side)
            elif kind == "result":
                result = record
                subtype = string(record.get("subtype")) or ""
                text = string(record.get("result")) or text_of(record.get("errors")) or None
                b.add(line, "result", f"result.{subtype}", text=text, **side)
                s.cost_usd = amount(record.get("total_cost_usd"))
                duration = amount(record.get("duration_ms"))
                s.duration_s = duration / 1000 if duration is not None else None
                s.completed = record.get("is_error") is False
                s.final_text = string(record.get("result"))
                s.reported_turns = count(record.get("num_turns"))
                s.reported_turns_label = "num_turns in its result line"
            elif kind == "stream_event":
                b.add(line, "system", f"stream_event.{mapping(record, 'event').get('type') or ''}", **side)
            else:
                b.raw(line, record, str(kind or ""))
    reported = totals(result) if result is not None else None
    s.usage = reported if reported is not None else usage_sum(e.usage for e in s.events)
    return b.finish(closing_record=True), reported is not None


def run_usage(stream: Path, session_files: Iterable[Path]) -> Usage:
    """A run's usage: its result line's totals, cost and turns; without them (a killed session),
    each model call's usage counted once, the call's final figures taken from Claude Code's own
    session files where they hold its message id (the stream has the figures as the call began)."""
    calls = _anthropic.Calls()
    session, reported = _read(records(stream), str(stream), calls)
    if reported:
        return spent(session, session.reported_turns)
    by_message = calls.usage_by_message(session.events, "stream")
    for path in session_files:
        if path.suffix == ".jsonl":
            native_calls = _anthropic.Calls()
            native = claude_native.parse(records(path), str(path), native_calls)
            by_message.update(native_calls.usage_by_message(native.events, path.name))
    return usage_sum(by_message.values()).model_copy(update={"turns": len(by_message) or None})


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
