"""Codex CLI session rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`).

Every line is `{timestamp, type, payload}`. The timeline is the `response_item` lines (messages,
reasoning summaries, function and custom tool calls with their outputs); `event_msg` lines add the
human prompt (`user_message`), token counts, aborted turns and review mode, and echo the
assistant's messages and reasoning (`agent_message`, `agent_reasoning`). An echo becomes a system
event without text once its `response_item` twin is found, so nothing is counted or shown twice;
where the session has `user_message` prompts (or `item_completed` echoes of a UserMessage), a
user `response_item` that is none of them is context Codex injected (AGENTS.md, environment) and
becomes a system event. Newer CLIs (0.171) add a `world_state` snapshot of the environment,
`event_msg.thread_settings_applied` (model and provider), an `event_msg.item_completed` echo of
every item and a `token_usage_record` beside each `token_count`: system events, the echoes and
records without text or usage, so nothing is shown or counted twice.

The oldest shape (codex-rs until mid 2025, and forks after) has no `{timestamp, type, payload}`
envelope: a first line of session metadata (`id`, `timestamp`, `instructions`, `git`), then the
response items themselves, one per line and without timestamps, between `{"record_type": "state"}`
snapshots. It has no token counts, so its usage is unknown, and no prompt echoes: a user message
is context Codex injected when it opens with one of its tags (`INJECTED`).

Tool lifecycle events (`exec_command_begin`/`_end`, `patch_apply_begin`/`_end`, `mcp_tool_call_*`,
`web_search_*`) repeat a call and its output that `response_item` lines hold: they are kept as
events without text, except an `exec_command_end` whose call has no output line (a command the user
ran with `!`), which becomes that command's result; the `<user_shell_command>` message that then
hands the model the same output is shown as a system event without text.

Usage: `token_count` totals are cumulative and often repeated, so each count that moves the total
gives that call's `last_token_usage` to the call's last assistant event (or keeps it, where the
call left none), and the session's usage is the last total. The total starts again from zero when a
session is resumed in a new process (and a review subagent's counts appear in between), so where
the total ever went back, the last total is only the latest process's: the session's usage is then
the sum of every call's usage, the whole consumption. apply_patch
calls (a `custom_tool_call`, or the legacy `apply_patch <<'PATCH'` inside a shell call) carry
unified diffs, one per file, joined; the call's `file_path` is the first file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder, arguments, count, items, mapping, string, text_of, when
from rooftop.transcripts.diffs import Files, patch_diffs
from rooftop.transcripts.events import Event, Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record
from rooftop.transcripts.parsers import PARSERS, Parser
from rooftop.transcripts.usage import Usage, usage_sum

FORMAT = "codex_rollout"
PRIORITY = 20
TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
ECHOES = {"world_state", "token_usage_record"}  # records of newer CLIs that repeat what other lines say
ITEMS = {"message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
         "custom_tool_call_output", "local_shell_call", "web_search_call"}  # bare response items (oldest shape)
LIFECYCLE = {"exec_command_begin", "exec_command_end", "exec_command_output_delta", "patch_apply_begin",
             "patch_apply_end", "mcp_tool_call_begin", "mcp_tool_call_end", "web_search_begin", "web_search_end",
             "turn_diff", "background_event", "plan_update"}
# what Codex puts in a user message of its own: where no prompt echo tells the human's apart (the
# oldest shape), these opening tags do
INJECTED = ("<user_instructions>", "<environment_context>", "<user_shell_command>", "# AGENTS.md instructions")
SHELLS = {"shell", "shell_command", "exec_command", "local_shell", "container.exec"}
# the status line of a tool's text output: shell_command and apply_patch say `Exit code: N`,
# unified exec (exec_command) `Process exited with code N`, both in the header before `Output:`
_EXIT = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)$", re.MULTILINE)
# what a command that could not run says instead (older CLIs, as plain text)
_FAILED = re.compile(r"(?:failed in sandbox \S+ with )?execution error: ")


def sniff(records: list[Any]) -> bool:
    return any(isinstance(r, dict) and (string(r.get("type")) in TYPES and isinstance(r.get("payload"), dict)
                                        and "timestamp" in r or _oldest_meta(r) or r.get("record_type") == "state")
               for r in records)


def _oldest_meta(record: dict[str, Any]) -> bool:
    """The first line of the oldest shape: session metadata, no envelope."""
    return "type" not in record and "id" in record and "timestamp" in record and (
        "instructions" in record or "git" in record)


def tokens(usage: Any) -> Usage | None:
    """An OpenAI usage object: `input_tokens` already counts the cached part, as ours does."""
    if not isinstance(usage, dict):
        return None
    return Usage(input_tokens=count(usage.get("input_tokens")), output_tokens=count(usage.get("output_tokens")),
                 cache_read_tokens=count(usage.get("cached_input_tokens")),
                 cache_write_tokens=count(usage.get("cache_write_input_tokens")),
                 reasoning_tokens=count(usage.get("reasoning_output_tokens")))


def _patch_text(args: Any) -> str | None:
    """The patch of a shell call that runs apply_patch (`bash -lc "apply_patch <<'PATCH' ..."`)."""
    if not isinstance(args, dict):
        return None
    command = args.get("command", args.get("cmd"))
    parts = command if isinstance(command, list) else [command]
    texts = [p for p in parts if isinstance(p, str)]
    if not any("apply_patch" in t for t in texts):
        return None
    for text in texts:
        if "*** Begin Patch" in text:
            body = text[text.index("*** Begin Patch"):]
            end = body.find("*** End Patch")
            return body if end < 0 else body[:end + len("*** End Patch")]
    return None


def _with_patch(call: ToolCall, patch: str | None, files: Files) -> ToolCall:
    diffs = patch_diffs(patch, files) if patch else []
    if diffs:
        call.file_path = diffs[0][0]
        call.diff = "".join(diff for _, diff in diffs)
    return call


def _output(payload: dict[str, Any]) -> ToolResult:
    """A tool's output: JSON text `{"output", "metadata": {"exit_code"}}` (shell, apply_patch), text
    with a status line in its header (shell_command, exec_command: see `_EXIT`), or content parts."""
    output = payload.get("output")
    is_error = False
    decoded = arguments(output) if isinstance(output, str) else output
    if isinstance(decoded, dict) and "output" in decoded:
        code = mapping(decoded, "metadata").get("exit_code")
        is_error = isinstance(code, int) and code != 0
        output = decoded["output"]
    elif isinstance(output, str) and (match := _EXIT.search(output.split("\nOutput:", 1)[0])) is not None:
        is_error = match.group(1) != "0"
    elif isinstance(output, str) and _FAILED.match(output):
        is_error = True
    success = payload.get("success")
    if success is False:
        is_error = True
    return ToolResult(call_id=string(payload.get("call_id")), content=text_of(output), is_error=is_error)


def _review(payload: dict[str, Any]) -> str | None:
    review = mapping(payload, "review_output")
    findings = review.get("findings")
    lines = [string(review.get("overall_explanation")) or ""]
    lines += [f"- {text_of(f.get('title'))}" for f in items(findings) if isinstance(f, dict)]
    return "\n".join(line for line in lines if line) or None


def _input(total: dict[str, Any] | None) -> int:
    return count((total or {}).get("input_tokens")) or 0


class _Rollout:
    def __init__(self, path: str | None) -> None:
        self.b = Builder(FORMAT, path)
        self.files = Files()
        self.model: str | None = None
        self.total: dict[str, Any] | None = None  # the last cumulative token_count
        self.calls: list[Usage] = []  # each model call's own usage, in order
        self.went_back = False  # a total below the one before it: a resumed process, a subagent
        self.call_start = 0  # the first event after the last token_count: the next call's
        self.ends: list[str] = []  # task_started / task_complete / turn_aborted, in order
        self.prompts: set[str] = set()  # the human's prompts, from item_completed echoes (newer CLIs)
        self.ended: list[tuple[Event, dict[str, Any]]] = []  # exec_command_end events, resolved at the end

    def meta(self, line: int, payload: dict[str, Any], stamp: Any) -> None:
        s = self.b.session
        s.session_id = s.session_id or string(payload.get("id"))
        s.cwd = s.cwd or string(payload.get("cwd"))
        if s.agent is None and isinstance(payload.get("cli_version"), str):
            origin = string(payload.get("originator"))
            s.agent = f"codex {payload['cli_version']}" + (f" ({origin})" if origin else "")
        source = payload.get("source")
        text = f"source: {text_of(source)}" if source is not None else None
        self.b.add(line, "system", "session_meta", text=text, timestamp=stamp)

    def response(self, line: int, payload: dict[str, Any], stamp: Any) -> None:
        kind = payload.get("type")
        add, model = self.b.add, {"timestamp": stamp}
        if kind == "message":
            role = payload.get("role")
            text = text_of(payload.get("content")) or None
            if role == "assistant":
                add(line, "assistant", "response_item.message", text=text, model=self.model, **model)
            else:
                add(line, "user" if role == "user" else "system", "response_item.message", text=text, **model)
        elif kind == "reasoning":
            summary = payload.get("summary")
            parts = [text_of(part) for part in summary] if isinstance(summary, list) else []
            thought = "\n\n".join(parts) or text_of(payload.get("content")) or None
            add(line, "assistant", "response_item.reasoning", reasoning=thought, model=self.model, **model)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            name = string(payload.get("name")) or kind.removesuffix("_call")
            raw = payload.get("arguments", payload.get("input", payload.get("action")))
            call = ToolCall(id=string(payload.get("call_id")), name=name, arguments=arguments(raw))
            if name == "apply_patch" and isinstance(raw, str):
                _with_patch(call, raw, self.files)
            elif name in SHELLS:
                _with_patch(call, _patch_text(call.arguments), self.files)
            add(line, "assistant", f"response_item.{kind}", tool_calls=[call], model=self.model, **model)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            add(line, "tool", f"response_item.{kind}", tool_result=_output(payload), **model)
        elif kind == "ghost_snapshot":
            add(line, "system", "response_item.ghost_snapshot", **model)
        else:
            self.b.raw(line, {"type": "response_item", "payload": payload}, f"response_item.{kind}")

    def event(self, line: int, payload: dict[str, Any], stamp: Any) -> None:
        kind = payload.get("type")
        add, at = self.b.add, {"timestamp": stamp}
        name = f"event_msg.{kind}"
        if kind == "user_message":
            add(line, "user", name, text=string(payload.get("message")), **at)
        elif kind == "agent_message":
            add(line, "assistant", name, text=string(payload.get("message")), model=self.model, **at)
        elif kind == "agent_reasoning":
            add(line, "assistant", name, reasoning=string(payload.get("text")), model=self.model, **at)
        elif kind == "token_count":
            info = mapping(payload, "info")
            cumulative = info.get("total_token_usage")
            moved = isinstance(cumulative, dict) and cumulative != self.total
            usage = tokens(info.get("last_token_usage")) if moved else None
            if moved:
                self.went_back = self.went_back or _input(cumulative) < _input(self.total)
                self.total = cumulative
                self.calls.append(usage or Usage())
                if self.b.charge(usage, self.call_start, "response_item."):
                    usage = None
            add(line, "system", name, usage=usage, **at)
            self.call_start = len(self.b.session.events)
        elif kind in ("turn_aborted", "error", "stream_error"):
            problem = string(payload.get("message")) or f"turn aborted: {payload.get('reason')}"
            add(line, "error", name, text=problem, **at)
            self.ends.append("aborted" if kind == "turn_aborted" else "error")
        elif kind in ("task_started", "task_complete"):
            last = string(payload.get("last_agent_message")) if kind == "task_complete" else None
            add(line, "result" if kind == "task_complete" else "system", name, text=last, **at)
            # a turn that hit an error (the retry limit) still ends with a task_complete, without a message
            failed = kind == "task_complete" and (payload.get("error") is not None or (
                not last and bool(self.ends) and self.ends[-1] == "error"))
            self.ends.append("error" if failed else kind)
        elif kind == "thread_settings_applied":
            settings = mapping(payload, "thread_settings")
            self.model = self.model or string(settings.get("model"))
            provider = string(settings.get("model_provider_id"))
            add(line, "system", name, text=" via ".join(p for p in (string(settings.get("model")), provider) if p)
                or None, **at)
        elif kind == "item_completed":
            item = mapping(payload, "item")
            if item.get("type") == "UserMessage":  # the human's prompt, as user_message said it before
                self.prompts.add(text_of(item.get("content")).strip())
            add(line, "system", name, **at)  # an echo of a response_item or of a tool's outcome
        elif kind in LIFECYCLE:
            event = add(line, "system", name, **at)
            if kind == "exec_command_end":
                self.ended.append((event, payload))
        elif kind in ("entered_review_mode", "exited_review_mode", "context_compacted"):
            note = string(payload.get("user_facing_hint")) if kind == "entered_review_mode" else _review(payload)
            add(line, "system", name, text=note if kind != "context_compacted" else "context compacted", **at)
        else:
            self.b.raw(line, {"type": "event_msg", "payload": payload}, name)

    def parse(self, records: Iterable[Record]) -> Session:
        for line, record in self.b.walk(records):
            with self.b.guard(line, record):
                kind, payload, stamp = record.get("type"), mapping(record, "payload"), when(record.get("timestamp"))
                if kind == "session_meta":
                    self.meta(line, payload, stamp)
                elif kind == "turn_context":
                    self.model = string(payload.get("model")) or self.model
                    self.b.session.model = self.b.session.model or self.model
                    self.b.add(line, "system", "turn_context", model=self.model, timestamp=stamp)
                elif kind == "response_item":
                    self.response(line, payload, stamp)
                elif kind == "event_msg":
                    self.event(line, payload, stamp)
                elif kind == "compacted":
                    self.b.add(line, "system", "compacted", text="context compacted", timestamp=stamp)
                elif kind in ECHOES:
                    self.b.add(line, "system", str(kind), timestamp=stamp)
                elif record.get("record_type") == "state":
                    self.b.add(line, "system", "state")
                elif _oldest_meta(record):
                    self.meta(line, record, stamp)
                elif kind in ITEMS and "payload" not in record:
                    self.response(line, record, None)
                else:
                    self.b.raw(line, record, str(kind or ""))
        s = self.b.session
        s.usage = (usage_sum(self.calls) if self.went_back else tokens(self.total)) or Usage()
        has_tasks = any(e.startswith("task_") for e in self.ends)  # older CLIs write no end of task
        s.completed = self.ends[-1] == "task_complete" if has_tasks else None
        _hide_echoes(s.events, self.prompts)
        if _unanswered_commands(s.events, self.ended):
            _hide_shell_echoes(s.events)
        return self.b.finish()


def _hide_echoes(events: list[Event], prompts: set[str]) -> None:
    """`event_msg` echoes of `response_item` lines lose their text (see the module's docstring)."""
    said = {e.text for e in events if e.kind == "response_item.message" and e.role == "assistant" and e.text}
    thought = set()
    for e in events:
        if e.kind == "response_item.reasoning" and e.reasoning:
            thought.add(e.reasoning)
            thought.update(e.reasoning.split("\n\n"))
    prompts = prompts | {e.text.strip() for e in events if e.kind == "event_msg.user_message" and e.text}
    for e in events:
        if e.kind in ("event_msg.agent_message", "event_msg.task_complete") and e.text in said:
            e.role, e.text = ("system" if e.role == "assistant" else e.role), None
        elif e.kind == "event_msg.agent_reasoning" and e.reasoning in thought:
            e.role, e.reasoning = "system", None
        elif e.kind == "response_item.message" and e.role == "user":
            text = (e.text or "").strip()
            if (prompts and text not in prompts) or (not prompts and text.startswith(INJECTED)):
                e.role = "system"
    heard = {e.text.strip() for e in events if e.kind == "response_item.message" and e.role == "user" and e.text}
    for e in events:
        if e.kind == "event_msg.user_message" and e.text and e.text.strip() in heard:
            e.role, e.text = "system", None


def _unanswered_commands(events: list[Event], ended: list[tuple[Event, dict[str, Any]]]) -> int:
    """An `exec_command_end` whose call has no output line shows that command's output; how many did."""
    answered = {e.tool_result.call_id for e in events if e.tool_result is not None}
    commands = 0
    for event, payload in ended:
        call_id = string(payload.get("call_id"))
        if call_id in answered:
            continue
        commands += 1
        output = payload.get("aggregated_output", payload.get("formatted_output"))
        if not isinstance(output, str):
            output = "\n".join(t for t in (string(payload.get("stdout")), string(payload.get("stderr"))) if t)
        code = payload.get("exit_code")
        command = payload.get("command")
        shown = " ".join(command) if isinstance(command, list) else text_of(command) if command else ""
        event.role = "tool"
        event.text = f"$ {shown}" if shown else None
        event.tool_result = ToolResult(call_id=call_id, content=output,
                                       is_error=isinstance(code, int) and code != 0)
    return commands


def _hide_shell_echoes(events: list[Event]) -> None:
    """The `<user_shell_command>` message Codex hands the model after a command the user ran repeats
    the output its `exec_command_end` already shows."""
    for e in events:
        if e.kind == "response_item.message" and e.role != "assistant" and (e.text or "").lstrip().startswith(
                "<user_shell_command>"):
            e.role, e.text = "system", None


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    return _Rollout(path).parse(records)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
