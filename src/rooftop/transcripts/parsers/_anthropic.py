"""Anthropic-shaped messages, shared by Claude Code's stream (claude) and its session files
(claude_native): content blocks, tool calls and their diffs, tool results and their structured
extras, and usage counted once per message id.

Claude Code writes one line per content block and repeats the message's id on each, with the usage
so far: the first line's output count is a placeholder (a few tokens), the last line's is the
message's. So a message's usage is counted once, on its first line's event, and each later line of
the same id replaces it with its own. A tool call's diff is made when the call is seen
(from what the transcript has shown of the file), then replaced by the exact one when its result
carries `structuredPatch`; a call whose result is an error changed nothing, so its diff is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rooftop.transcripts.build import Builder, count, mapping, string, text_of, total
from rooftop.transcripts.diffs import Files, from_hunks
from rooftop.transcripts.events import Event, ToolCall, ToolResult
from rooftop.transcripts.usage import Usage

SYNTHETIC_MODEL = "<synthetic>"  # messages Claude Code makes up itself (e.g. "Not logged in"): no model call
SUBAGENT_TOOLS = {"Agent", "Task"}
EDIT_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}


def tokens(usage: Any) -> Usage | None:
    """An Anthropic usage object; its `input_tokens` leaves out the cached part, ours includes it."""
    if not isinstance(usage, dict):
        return None
    read, write = count(usage.get("cache_read_input_tokens")), count(usage.get("cache_creation_input_tokens"))
    return Usage(input_tokens=total(count(usage.get("input_tokens")), read, write),
                 output_tokens=count(usage.get("output_tokens")), cache_read_tokens=read, cache_write_tokens=write)


@dataclass
class Calls:
    """The tool calls of a session by id, and what the transcript has shown of each file."""

    files: Files = field(default_factory=Files)
    by_id: dict[str, ToolCall] = field(default_factory=dict)
    before: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # call id -> (path, content before)
    messages: dict[str, Event] = field(default_factory=dict)  # message id -> the event holding its usage

    def usage_by_message(self, events: list[Event], place: str) -> dict[str, Usage]:
        """Each model call's usage by its message id (one without an id by its event's place in
        `place`), for counting a call once across files that repeat it."""
        ids = {id(event): ident for ident, event in self.messages.items()}
        return {ids.get(id(e), f"{place}#{e.index}"): e.usage for e in events if e.usage is not None}

    def call(self, block: dict[str, Any]) -> ToolCall:
        name = string(block.get("name")) or "?"
        ident = string(block.get("id"))
        args = block.get("input")
        call = ToolCall(id=ident, name=name, arguments=args, subagent=name in SUBAGENT_TOOLS)
        if name in EDIT_TOOLS and isinstance(args, dict):
            path = string(args.get("file_path")) or string(args.get("notebook_path"))
            call.file_path = path
            if path is not None:
                if ident is not None:
                    self.before[ident] = (path, self.files.get(path))
                call.diff = self._diff(name, path, args)
        if ident is not None:
            self.by_id[ident] = call
        return call

    def _diff(self, name: str, path: str, args: dict[str, Any]) -> str | None:
        if name == "Write" and isinstance(args.get("content"), str):
            return self.files.write(path, args["content"])
        if name == "Edit":
            edits = [args]
        elif name == "MultiEdit" and isinstance(args.get("edits"), list):
            edits = [e for e in args["edits"] if isinstance(e, dict)]
        else:
            return None
        pairs = [(e.get("old_string"), e.get("new_string"), e.get("replace_all") is True) for e in edits]
        good = [(o, n, a) for o, n, a in pairs if isinstance(o, str) and isinstance(n, str)]
        return self.files.edit(path, good) if good else None

    def result(self, call_id: str | None, extra: Any, is_error: bool) -> None:
        """A tool's result: an error undoes the call's change; a structured result refines its diff and
        tells what files hold (a full read, an edit's original file)."""
        call = self.by_id.get(call_id) if call_id else None
        if is_error:
            if call is not None and call_id in self.before:
                path, before = self.before.pop(call_id)
                self.files.set(path, before)
                call.diff = None
            return
        if not isinstance(extra, dict):
            return
        read = mapping(extra, "file")
        whole = read.get("startLine") in (None, 1) and read.get("numLines") == read.get("totalLines")
        if extra.get("type") == "text" and whole and isinstance(read.get("filePath"), str):
            if isinstance(read.get("content"), str):
                self.files.set(read["filePath"], read["content"])
        changed = string(extra.get("filePath"))
        if call is None or changed is None:
            return
        if isinstance(extra.get("originalFile"), str) and call.name in ("Edit", "MultiEdit"):
            self.files.set(changed, extra["originalFile"])
            if isinstance(call.arguments, dict):
                call.diff = self._diff(call.name, changed, call.arguments)
        hunks = extra.get("structuredPatch")
        exact = from_hunks(changed, hunks) if isinstance(hunks, list) else None
        if exact is not None:
            call.diff = exact


def assistant(b: Builder, line: int, message: dict[str, Any], calls: Calls, **fields: Any) -> Event:
    """One assistant line: its text, thinking and tool calls; usage only on a message id's first line."""
    texts, thoughts, tool_calls = [], [], []
    content = message.get("content")
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            texts.append(block)
        elif not isinstance(block, dict):
            continue
        elif block.get("type") == "text":
            texts.append(text_of(block.get("text")))
        elif block.get("type") == "thinking":
            thoughts.append(text_of(block.get("thinking")))
        elif block.get("type") == "redacted_thinking":
            thoughts.append("[redacted thinking]")
        elif block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
            tool_calls.append(calls.call(block))
        else:
            texts.append(text_of(block))
    model = string(message.get("model"))
    ident = string(message.get("id"))
    usage = tokens(message.get("usage")) if model != SYNTHETIC_MODEL else None
    first = calls.messages.get(ident) if ident is not None else None
    if first is not None and usage is not None:
        first.usage = usage  # a later line of the same message: its usage supersedes the earlier one
    event = b.add(line, "assistant", "assistant", text="\n".join(texts) or None, reasoning="\n".join(thoughts) or None,
                  tool_calls=tool_calls, usage=None if first is not None else usage, model=model, **fields)
    if first is None and ident is not None and usage is not None:
        calls.messages[ident] = event
    return event


def user(b: Builder, line: int, message: dict[str, Any], extra: Any, calls: Calls, **fields: Any) -> list[Event]:
    """One user line: its tool results (one event each) and any text the user (or Claude Code) wrote."""
    content = message.get("content")
    events, texts = [], []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            call_id = string(block.get("tool_use_id"))
            is_error = block.get("is_error") is True
            calls.result(call_id, extra, is_error)
            result = ToolResult(call_id=call_id, content=text_of(block.get("content")), is_error=is_error)
            events.append(b.add(line, "tool", "tool_result", tool_result=result, **fields))
        elif block is not None:
            texts.append(text_of(block))
    if texts or not events:
        events.append(b.add(line, "user", "user", text="\n".join(t for t in texts if t) or None, **fields))
    return events
