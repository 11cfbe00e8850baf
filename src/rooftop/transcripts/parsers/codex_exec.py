"""`codex exec --json` stdout: `thread.started`, `turn.started`, `item.started|updated|completed`,
`turn.completed` (that turn's usage), `turn.failed`, `error`.

An item is a message, reasoning, a command, a file change, an MCP or web-search call, a to-do list
or an error. A tool-like item becomes an assistant tool call when it starts (or when it completes
without having started) and a tool result when it completes, both keyed by the item id. The stream
has no model, no timestamps and no file contents (`file_change` names paths only: no diff); the
session's rollout file has them, which is why `detect.load` prefers it for a run folder.

Usage is the sum of the turns' `turn.completed` usage; the session completed when its last turn
did and nothing failed after it. `run_usage` is what the `codex` adapter records for a run: its
rollouts' usage where they counted any call, else the stream's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rooftop.transcripts.build import Builder, items, mapping, string, text_of
from rooftop.transcripts.events import Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record, records
from rooftop.transcripts.parsers import PARSERS, Parser, codex_rollout
from rooftop.transcripts.parsers.codex_rollout import tokens
from rooftop.transcripts.spent import counted_calls, spent
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "codex_exec"
PRIORITY = 25
TOOL_ITEMS = {"command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"}


def sniff(records: list[Any]) -> bool:
    kinds = [r.get("type") for r in records if isinstance(r, dict)]
    return any(isinstance(k, str) and k.partition(".")[0] in ("thread", "turn", "item") and "." in k for k in kinds)


def _call(item: dict[str, Any]) -> ToolCall:
    kind = item.get("type")
    ident = string(item.get("id"))
    if kind == "command_execution":
        return ToolCall(id=ident, name="shell", arguments={"command": item.get("command")})
    if kind == "file_change":
        changes = [c for c in items(item.get("changes")) if isinstance(c, dict)]
        first = next((string(c.get("path")) for c in changes), None)
        return ToolCall(id=ident, name="file_change", arguments={"changes": changes}, file_path=first)
    if kind == "mcp_tool_call":
        name = "/".join(p for p in (string(item.get("server")), string(item.get("tool"))) if p)
        return ToolCall(id=ident, name=name or "mcp", arguments=item.get("arguments"))
    if kind == "web_search":
        return ToolCall(id=ident, name="web_search", arguments={"query": item.get("query")})
    return ToolCall(id=ident, name=string(item.get("tool")) or str(kind), arguments=item.get("prompt"),
                    subagent=item.get("tool") == "spawn_agent")


def _result(item: dict[str, Any]) -> ToolResult:
    kind, status = item.get("type"), item.get("status")
    failed = status in ("failed", "declined") or item.get("error") is not None
    if kind == "command_execution":
        code = item.get("exit_code")
        content = text_of(item.get("aggregated_output"))
        failed = failed or (isinstance(code, int) and code != 0)
    elif kind == "file_change":
        changes = [c for c in items(item.get("changes")) if isinstance(c, dict)]
        content = "\n".join(f"{c.get('kind')} {c.get('path')}" for c in changes)
    elif kind == "mcp_tool_call":
        content = text_of(mapping(item, "error").get("message")) or text_of(mapping(item, "result").get("content"))
    else:
        content = text_of(item.get("agents_states") or status)
    return ToolResult(call_id=string(item.get("id")), content=content, is_error=failed)


def _todo(item: dict[str, Any]) -> str:
    entries = [e for e in items(item.get("items")) if isinstance(e, dict)]
    return "\n".join(f"[{'x' if e.get('completed') else ' '}] {text_of(e.get('text'))}" for e in entries)


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    started: set[str] = set()
    done: bool | None = None
    for line, record in b.walk(records):
        with b.guard(line, record):
            kind = string(record.get("type")) or ""
            item = mapping(record, "item")
            item_type = string(item.get("type")) or ""
            name = f"{kind}.{item_type}" if item else kind
            if kind == "thread.started":
                s.session_id = s.session_id or string(record.get("thread_id"))
                b.add(line, "system", kind)
            elif kind == "turn.started":
                done = False
                b.add(line, "system", kind)
            elif kind == "turn.completed":
                done = True
                b.add(line, "result", kind, usage=tokens(record.get("usage")))
            elif kind in ("turn.failed", "error"):
                done = False
                message = mapping(record, "error").get("message") or record.get("message")
                b.add(line, "error", kind, text=text_of(message))
            elif kind.startswith("item.") and item_type in TOOL_ITEMS:
                ident = string(item.get("id")) or ""
                if kind == "item.started" or (kind == "item.completed" and ident not in started):
                    started.add(ident)
                    b.add(line, "assistant", name, tool_calls=[_call(item)])
                if kind == "item.completed":
                    b.add(line, "tool", name, tool_result=_result(item))
                elif kind == "item.updated":
                    b.add(line, "system", name)
            elif kind.startswith("item.") and item_type == "agent_message":
                b.add(line, "assistant", name, text=string(item.get("text")))
            elif kind.startswith("item.") and item_type == "reasoning":
                b.add(line, "assistant", name, reasoning=string(item.get("text")))
            elif kind.startswith("item.") and item_type in ("todo_list", "plan"):
                plan = _todo(item) if item_type == "todo_list" else string(item.get("text"))
                b.add(line, "assistant", name, text=plan)
            elif kind.startswith("item.") and item_type == "error":
                b.add(line, "error", name, text=string(item.get("message")))
            else:
                b.raw(line, record, kind)
    s.usage = usage_sum(e.usage for e in s.events)
    s.completed = done
    s.agent = "codex"
    return b.finish()


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))


def run_usage(stream: Path, rollouts: Iterable[Path]) -> Usage:
    """A run's usage: its rollouts' (one per session, a subagent's its own), which count reasoning
    and survive a kill, each with its model calls; without a rollout that counted a call, the
    stream's turns."""
    sessions = [codex_rollout.parse(records(path), str(path)) for path in rollouts]
    counted = [spent(session, calls) for session in sessions if (calls := counted_calls(session))]
    return usage_sum(counted) if counted else parse(records(stream), str(stream)).usage
