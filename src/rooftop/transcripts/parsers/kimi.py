"""Kimi Code CLI's messages: `kimi --print --output-format stream-json` stdout, and the session's
`context.jsonl`, which holds the same lines plus the user's prompts and bookkeeping roles.

Each line is a bare chat message: `{"role": "assistant", "content": text or parts (text, think),
"tool_calls": [...]}`, `{"role": "tool", "tool_call_id", "content"}`, `{"role": "user"}`, and in
the context file `_checkpoint` and `_usage` (the context's size, not tokens spent). A tool result
whose text starts `<system>ERROR` is an error. Edits diff from their arguments (StrReplaceFile's
old/new snippets, WriteFile's content).

A subagent's messages are in a file of their own, nested here under the call that started it:
`context_sub_N.jsonl` beside the context (older CLIs: the N-th task whose events the wire log
carries as `SubagentEvent`s, by its `task_tool_call_id`; without a wire log, the N-th `Task` call), or
`subagents/<agent_id>/context.jsonl` (newer ones: the `Agent` call whose result names that
`agent_id`).

These files carry no usage; the session's `wire.jsonl` does (one StatusUpdate per step, in step
order, and a subagent's inside its `SubagentEvent`s), so `parse_files([context, wire])` gives each
assistant message its step's usage (the step holding its tool calls' ids; a message without calls,
the next step without calls: a step the context file lost is passed over, not handed to the next
message), the session the whole log's usage, subagents' included, and its tool results' exact
diffs. Without a wire log, usage is empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rooftop.transcripts.build import Builder, arguments, count, items, mapping, string, text_of
from rooftop.transcripts.diffs import Files
from rooftop.transcripts.events import Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record, head, records
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.parsers.kimi_wire import Step, Wire, task_of
from rooftop.transcripts.parsers.kimi_wire import sniff as wire_sniff
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "kimi"
PRIORITY = 45
ROLES = {"user", "assistant", "tool", "system", "_checkpoint", "_usage", "_system_prompt"}
SUBAGENT_TOOLS = {"Task", "Agent"}
_AGENT_ID = re.compile(r"agent_id: ([A-Za-z0-9_-]+)")
_SUB_NUMBER = re.compile(r"context_sub_(\d+)\.jsonl$")


def sniff(records: list[Any]) -> bool:
    return any(isinstance(r, dict) and string(r.get("role")) in ROLES and "type" not in r for r in records)


def _call(raw: Any, files: Files) -> ToolCall:
    function = mapping(raw, "function")
    name = string(function.get("name")) or "?"
    args = arguments(function.get("arguments"))
    call = ToolCall(id=string(raw.get("id")) if isinstance(raw, dict) else None, name=name, arguments=args,
                    subagent=name in SUBAGENT_TOOLS)
    path = string(args.get("path")) if isinstance(args, dict) else None
    if path is None or not isinstance(args, dict):
        return call
    if name == "WriteFile" and isinstance(args.get("content"), str):
        call.file_path = path
        if args.get("mode") == "append":
            call.diff = files.write(path, (files.get(path) or "") + args["content"])
        else:
            call.diff = files.write(path, args["content"])
    elif name == "StrReplaceFile":
        edits = args.get("edit")
        edits = edits if isinstance(edits, list) else [edits]
        pairs = [(e.get("old"), e.get("new"), e.get("replace_all") is True) for e in edits if isinstance(e, dict)]
        good = [(o, n, a) for o, n, a in pairs if isinstance(o, str) and isinstance(n, str)]
        call.file_path = path
        call.diff = files.edit(path, good) if good else None
    return call


def _content(value: Any) -> tuple[str | None, str | None]:
    """(text, reasoning) of a message's content: a string, or text and think parts."""
    if not isinstance(value, list):
        return text_of(value) or None, None
    texts = [text_of(p.get("text")) for p in value if isinstance(p, dict) and p.get("type") == "text"]
    thoughts = [text_of(p.get("think")) for p in value if isinstance(p, dict) and p.get("type") == "think"]
    others = [text_of(p) for p in value if not isinstance(p, dict) or p.get("type") not in ("text", "think")]
    return "\n".join(t for t in texts + others if t) or None, "\n".join(t for t in thoughts if t) or None


def parse(records: Iterable[Record], path: str | None = None, wire: Wire | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session
    files = Files()
    steps = _Steps(wire.steps if wire is not None else [])
    for line, record in b.walk(records):
        with b.guard(line, record):
            role = record.get("role")
            if role == "assistant":
                text, thought = _content(record.get("content"))
                calls = [_call(c, files) for c in items(record.get("tool_calls"))]
                for call in calls:
                    exact = wire.diffs.get(call.id or "") if wire is not None else None
                    if exact is not None and exact[1]:
                        call.file_path, call.diff = exact
                b.add(line, "assistant", "assistant", text=text, reasoning=thought, tool_calls=calls,
                      usage=steps.take({c.id for c in calls if c.id}))
            elif role == "tool":
                text, _ = _content(record.get("content"))
                failed = (text or "").startswith("<system>ERROR")
                result = ToolResult(call_id=string(record.get("tool_call_id")), content=text or "", is_error=failed)
                b.add(line, "tool", "tool", tool_result=result)
            elif role == "user":
                b.add(line, "user", "user", text=_content(record.get("content"))[0])
            elif role in ("system", "_system_prompt"):
                b.add(line, "system", str(role), text=_content(record.get("content"))[0])
            elif role == "_usage":
                size = count(record.get("token_count"))
                b.add(line, "system", "_usage", text=f"context: {size} tokens" if size is not None else None)
            elif role == "_checkpoint":
                b.add(line, "system", "_checkpoint", text=f"checkpoint {record.get('id')}")
            else:
                b.raw(line, record, str(role or record.get("type") or ""))
    s.usage = wire.usage if wire is not None else usage_sum(e.usage for e in s.events)
    if wire is not None and wire.first and wire.last:  # the context file has no times; its wire log does
        s.started_at = wire.first
        s.duration_s = round((wire.last - wire.first).total_seconds(), 3)
    s.agent = "kimi"
    return b.finish()


class _Steps:
    """The wire log's steps handed out in order to the context's assistant messages: to a message
    with tool calls, the next step that made one of them; to one without, the next step without
    any. Steps passed over are ones the context file does not hold."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps, self.next = steps, 0

    def take(self, ids: set[str]) -> Usage | None:
        for i in range(self.next, len(self.steps)):
            step = self.steps[i]
            if (ids & step.calls) if ids else not step.calls:
                self.next = i + 1
                return step.usage
        return None


def parse_files(paths: Sequence[str | Path]) -> Session:
    """A session from its message file (context.jsonl or stream-json stdout) and any wire log among
    `paths`, told apart by their content; the wire log gives usage and diffs."""
    wire, main, tasks = None, None, []
    for path in paths:
        if wire_sniff([value for _, value in head(path, 5)]):
            wire = Wire().read(records(path))
            tasks = subagent_tasks(path)
        elif main is None:
            main = path
    if main is None:
        return Session(format=FORMAT)
    session = parse(records(main), str(main), wire)
    nest_subagents(session, Path(main), tasks, wire)
    return session


def run_usage(stream: Path, wires: Iterable[Path]) -> Usage:
    """A print-mode run's usage: the steps its wire logs counted (its stream has no usage; a
    subagent with a wire log of its own is counted there), and a model call per assistant message
    of its stream."""
    steps = [step.usage for path in wires for step in Wire().read(records(path)).steps]
    calls = sum(1 for event in parse(records(stream), str(stream)).events if event.kind == "assistant")
    return usage_sum(steps).model_copy(update={"turns": calls})


def subagent_tasks(wire: str | Path) -> list[str]:
    """The task call ids a wire log's `SubagentEvent`s belong to, in the order they first appear."""
    seen: dict[str, None] = {}
    for _, record in records(wire):
        message = mapping(record, "message")
        if message.get("type") == "SubagentEvent":
            ident = task_of(mapping(message, "payload"))
            if ident:
                seen.setdefault(ident, None)
    return list(seen)


def subagent_files(session: Session, main: Path, tasks: list[str] | None = None) -> list[tuple[str, Path]]:
    """(the starting call's id, the subagent's context file) for each subagent found beside `main`;
    `tasks`: the wire log's task ids in order, which number the `context_sub_N` files."""
    calls = [c for e in session.events for c in e.tool_calls if c.subagent and c.id]
    results = {e.tool_result.call_id: e.tool_result.content for e in session.events if e.tool_result}
    numbered = sorted((p for p in main.parent.glob("context_sub_*.jsonl") if _SUB_NUMBER.search(p.name)),
                      key=lambda p: int(_SUB_NUMBER.search(p.name).group(1)))  # type: ignore[union-attr]
    order = tasks or [c.id or "" for c in calls if c.name == "Task"]
    found = list(zip(order, numbered, strict=False))
    for call in calls:
        named = _AGENT_ID.search(results.get(call.id, ""))
        path = main.parent / "subagents" / named.group(1) / "context.jsonl" if named else None
        if path is not None and path.is_file():
            found.append((call.id or "", path))
    return found


def nest_subagents(session: Session, main: Path, tasks: list[str] | None = None, wire: Wire | None = None) -> None:
    """Each subagent's events after the session's own, under the call that started it, with its
    usage from its own wire log, or from the session's (its `SubagentEvent`s)."""
    for call_id, path in subagent_files(session, main, tasks):
        own = path.with_name("wire.jsonl")
        if own.is_file() and path.name == "context.jsonl":
            sub_wire: Wire | None = Wire().read(records(own))
        else:
            sub_wire = wire.tasks.get(call_id) if wire is not None else None
        sub = parse(records(path), str(path), sub_wire)
        session.lines += sub.lines
        for event in sub.events:
            event.index, event.line, event.parent, event.sidechain = len(session.events), None, call_id, True
            session.events.append(event)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
