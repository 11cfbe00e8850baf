"""Transcript parsers: every format read into one event model, told apart by content.

Real transcripts (shared/fixtures/transcripts, or the folder ROOFTOP_TRANSCRIPT_FIXTURES names) are
the arbiter: each is detected as its format, every record lands in an event or a problem, and the
usage totals equal what the file itself says, computed here independently of the parsers. Small
files written by the tests cover what the real ones lack: bad and cut-off lines, unknown records,
rooftop's own transcript, and the fake CLIs' output.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rooftop.transcripts.detect import choose, detect, load, parse_file
from rooftop.transcripts.diffs import COMPUTED, paths
from rooftop.transcripts.events import Session
from rooftop.transcripts.parsers import codex_exec, kimi, registry
from rooftop.transcripts.usage import Usage
from rooftop.viewer.pages import Turns, model_calls

VARIABLE = "ROOFTOP_TRANSCRIPT_FIXTURES"
FIXTURES = Path(os.environ.get(VARIABLE) or Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "transcripts")
FAKES = Path(__file__).parent / "fakes" / "agents"
LABEL = f"\t({COMPUTED})"  # on the --- line of a diff whose line numbers were computed here
PROMPT = "# Make it fast\n\nWrite `ModelNew` in solution.py.\n"

# the format each fixture file is, by the start of its path under the fixtures folder
EXPECTED = {"claude/": "claude", "claude_native/": "claude_native", "codex/rollout_": "codex_rollout",
            "codex/exec-json_": "codex_exec", "codex/exec-text_": "codex_text", "kimi/context_": "kimi",
            "kimi/wire_": "kimi_wire", "opencode/": "opencode", "_synthetic/agent-sessions_codex": "codex_rollout",
            "_synthetic/takopi_codex_exec": "codex_exec"}


def _fixture_files() -> list[Path]:
    if not FIXTURES.is_dir():
        return []
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".txt"))


needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(),
                                    reason=f"no transcript fixtures at {FIXTURES}; set {VARIABLE} to their folder")


def fixture(relative: str) -> Path:
    path = FIXTURES / relative
    if not path.is_file():
        pytest.skip(f"fixture {relative} missing under {FIXTURES} (set {VARIABLE})")
    return path


def expected_format(path: Path) -> str | None:
    relative = path.relative_to(FIXTURES).as_posix()
    return next((fmt for prefix, fmt in EXPECTED.items() if relative.startswith(prefix)), None)


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, *records: Any, tail: str = "") -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records) + tail)
    return path


def added(usages: Any) -> Usage:
    out = Usage()
    for usage in usages:
        out = out + usage
    return out


def accounted(session: Session) -> set[int]:
    return {e.line for e in session.events if e.line is not None} | {p.line for p in session.problems}


# --- the real transcripts -----------------------------------------------------------------------------------

FILES = _fixture_files()


@needs_fixtures
@pytest.mark.parametrize("path", FILES or [None], ids=[p.relative_to(FIXTURES).as_posix() for p in FILES] or ["none"])
def test_fixture_is_detected_and_every_record_accounted_for(path):
    fmt = detect(path)
    assert fmt == (expected_format(path) or fmt) and fmt != "unknown"
    session = parse_file(path)
    assert session.format == fmt and session.events and not session.problems
    if fmt == "codex_text":  # plain text: every line counted, each section an event at its marker
        assert session.lines == len(path.read_text().splitlines())
        return
    lines = [n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    assert session.lines == len(lines)
    assert accounted(session) == set(lines)  # nothing silently dropped
    assert [e.index for e in session.events] == list(range(len(session.events)))


def _anthropic(usage: dict[str, Any]) -> Usage:
    read, write_ = usage.get("cache_read_input_tokens", 0), usage.get("cache_creation_input_tokens", 0)
    return Usage(input_tokens=usage["input_tokens"] + read + write_, output_tokens=usage["output_tokens"],
                 cache_read_tokens=read, cache_write_tokens=write_)


@needs_fixtures
@pytest.mark.parametrize("name", ["cc2.1.104_harbor_pdfminer_agent-subagent.jsonl",
                                  "cc2.1.179_harbor_sonnet46_mcp-tools.jsonl"])
def test_claude_usage_is_the_result_lines(name):
    path = fixture(f"claude/{name}")
    result = json_lines(path)[-1]
    session = load(path)
    models = result["modelUsage"].values()
    assert session.usage == Usage(
        input_tokens=sum(m["inputTokens"] + m["cacheReadInputTokens"] + m["cacheCreationInputTokens"] for m in models),
        output_tokens=sum(m["outputTokens"] for m in models),
        cache_read_tokens=sum(m["cacheReadInputTokens"] for m in models),
        cache_write_tokens=sum(m["cacheCreationInputTokens"] for m in models))
    assert session.cost_usd == result["total_cost_usd"] and session.completed is True
    assert session.duration_s == result["duration_ms"] / 1000 and session.final_text == result["result"]
    # result.usage is the main thread's: what its messages say, once per message id
    main = {r["message"]["id"]: r["message"]["usage"] for r in json_lines(path)
            if r["type"] == "assistant" and not r.get("parent_tool_use_id")}
    counted = added(e.usage for e in session.events if e.usage and not e.sidechain)
    assert (counted.input_tokens == _anthropic(result["usage"]).input_tokens
            == sum(_anthropic(u).input_tokens for u in main.values()))


@needs_fixtures
def test_claude_subagent_events_point_at_the_agent_call():
    path = fixture("claude/cc2.1.104_harbor_pdfminer_agent-subagent.jsonl")
    session = load(path)
    agents = [c for e in session.events for c in e.tool_calls if c.subagent]
    assert [c.name for c in agents] == ["Agent"]
    side_lines = {n for n, r in enumerate(json_lines(path), 1) if r.get("parent_tool_use_id")}
    assert len(side_lines) == 43
    assert {e.line for e in session.events if e.sidechain} == side_lines
    assert {e.parent for e in session.events if e.sidechain} == {agents[0].id}
    tasks = [e for e in session.events if e.kind.startswith("system.task_")]
    assert {e.parent for e in tasks} == {agents[0].id, None}  # the background Bash task is no subagent
    answer = next(e for e in session.events if e.tool_result and e.tool_result.call_id == agents[0].id)
    assert not answer.sidechain and answer.parent is None


@needs_fixtures
def test_claude_edits_carry_diffs_from_their_structured_patch():
    session = load(fixture("claude/cc2.1.104_harbor_pdfminer_agent-subagent.jsonl"))
    edits = [c for e in session.events for c in e.tool_calls if c.name in ("Edit", "Write")]
    assert len(edits) == 7 and all(c.file_path and c.diff for c in edits)
    first = edits[0].diff or ""
    assert first.startswith("--- /testbed/pdfminer/pdfdocument.py\n+++ /testbed/pdfminer/pdfdocument.py\n@@ -1052,16")
    assert "+            label = format_int_alpha(value).lower()\n" in first
    write_ = edits[-1]
    assert write_.name == "Write" and (write_.diff or "").startswith("--- /dev/null\n+++ /testbed/skills/")


@needs_fixtures
def test_claude_native_usage_once_per_message_id():
    for name in ("ca4291e5_main_session.jsonl", "ca4291e5_subagents_agent-a90795522da6172b3.jsonl"):
        path = fixture(f"claude_native/{name}")
        # a message's last line carries its usage: the earlier lines' output counts are placeholders
        usages = {r["message"]["id"]: r["message"]["usage"] for r in json_lines(path) if r["type"] == "assistant"}
        session = load(path)
        assert session.usage == added(_anthropic(u) for u in usages.values())
        assert session.session_id == "ca4291e5-5178-4fdb-972b-f6b4d6c26a65"
    side = load(fixture("claude_native/ca4291e5_subagents_agent-a90795522da6172b3.jsonl"))
    assert all(e.sidechain for e in side.events)


def _codex(usage: dict[str, Any]) -> Usage:
    return Usage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"],
                 cache_read_tokens=usage["cached_input_tokens"], reasoning_tokens=usage.get("reasoning_output_tokens"))


@needs_fixtures
@pytest.mark.parametrize("name,resumed", [("rollout_0.77.0_cli_shell_command-apply_patch-review.jsonl", True),
                                          ("rollout_0.77.0_review-subagent.jsonl", False)])
def test_codex_rollout_usage_counts_every_call_once_across_restarts_of_the_total(name, resumed):
    path = fixture(f"codex/{name}")
    infos = [r["payload"]["info"] for r in json_lines(path)
             if r["type"] == "event_msg" and r["payload"]["type"] == "token_count" and r["payload"]["info"]]
    session = load(path)
    # each change of the total is one call: its own usage, counted once
    moves = [(a, b) for a, b in zip([None, *infos], infos, strict=False)
             if a is None or a["total_token_usage"] != b["total_token_usage"]]
    changes = [b["last_token_usage"] for _, b in moves]
    went_back = any(a is not None and b["total_token_usage"]["input_tokens"] < a["total_token_usage"]["input_tokens"]
                    for a, b in moves)
    assert went_back is resumed
    calls = added(e.usage for e in session.events if e.usage)
    assert calls.output_tokens == sum(u["output_tokens"] for u in changes)
    last = _codex(infos[-1]["total_token_usage"])
    if resumed:  # the last total is only the latest process's: the session's usage is every call's
        assert session.usage == added(_codex(u) for u in changes)
        assert session.usage.input_tokens > last.input_tokens and session.usage.output_tokens > last.output_tokens
    else:
        assert session.usage == last
    assert session.model and session.model.startswith("gpt-") and session.agent == "codex 0.77.0 (codex_cli_rs)"


@needs_fixtures
def test_codex_apply_patch_gives_diffs_with_file_paths():
    session = load(fixture("codex/rollout_0.77.0_cli_shell_command-apply_patch-review.jsonl"))
    patches = [c for e in session.events for c in e.tool_calls if c.name == "apply_patch"]
    assert len(patches) == 33
    for call in patches:
        assert call.file_path and call.diff and call.diff.startswith("--- ")
        assert paths(call.diff)[0] == call.file_path
    assert any("\n+" in (c.diff or "") and "\n-" in (c.diff or "") for c in patches)


@needs_fixtures
def test_codex_rollout_echoes_are_not_shown_twice():
    session = load(fixture("codex/rollout_0.77.0_cli_shell_command-apply_patch-review.jsonl"))
    said = Counter(e.text for e in session.events if e.role == "assistant" and e.text)
    assert said and max(said.values()) == 1  # agent_message echoes lost their text
    prompts = [e for e in session.events if e.role == "user"]
    assert len(prompts) == 58 and not any((e.text or "").startswith("<environment_context>") for e in prompts)
    assert any(e.role == "error" and e.kind == "event_msg.turn_aborted" for e in session.events)


@needs_fixtures
@pytest.mark.parametrize("name", ["codex/exec-json_0.46.0_stream-output-4.jsonl",
                                  "codex/exec-json_0.46.0_stream-output-5.jsonl",
                                  "_synthetic/takopi_codex_exec_json_all_formats.jsonl"])
def test_codex_exec_usage_sums_the_turns(name):
    path = fixture(name)
    turns = [r["usage"] for r in json_lines(path) if r["type"] == "turn.completed"]
    session = load(path)
    assert session.usage == Usage(input_tokens=sum(u["input_tokens"] for u in turns),
                                  output_tokens=sum(u["output_tokens"] for u in turns),
                                  cache_read_tokens=sum(u["cached_input_tokens"] for u in turns))
    failed = json_lines(path)[-1]["type"] == "error"
    assert session.completed is (not failed)


@needs_fixtures
def test_codex_exec_items_become_calls_and_results():
    session = load(fixture("_synthetic/takopi_codex_exec_json_all_formats.jsonl"))
    results = {e.tool_result.call_id: e.tool_result for e in session.events if e.tool_result}
    calls = {c.id: c for e in session.events for c in e.tool_calls}
    assert set(results) == set(calls) == {"item_1", "item_2", "item_3", "item_4", "item_5", "item_6", "item_7"}
    assert results["item_2"].is_error and results["item_6"].is_error and not results["item_1"].is_error
    assert calls["item_3"].file_path == "src/compute_answer.py" and calls["item_5"].name == "github/search_issues"


@needs_fixtures
def test_codex_text_is_a_minimal_session():
    session = load(fixture("codex/exec-text_0.104.0_stdout.txt"))
    assert (session.model, session.session_id) == ("gpt-5.3-codex", "019c7adc-0a32-7580-8fcd-edae787ff0b1")
    kinds = Counter(e.kind for e in session.events)
    assert kinds["user"] == 1 and kinds["codex"] == 8 and kinds["thinking"] == 12 and kinds["file update"] == 11
    result = session.events[-1]
    assert result.role == "result" and result.raw == {"tokens_used": 72962} and session.completed
    patches = [c for e in session.events for c in e.tool_calls if c.name == "apply_patch"]
    assert len(patches) == 2 and all(c.diff and c.file_path and c.file_path.endswith("test_pattern_app.cpp")
                                     for c in patches)
    assert (session.final_text or "").startswith("Implemented with minimal changes")


@needs_fixtures
@pytest.mark.parametrize("name", ["run-json_edit-todowrite.jsonl", "run-json_task-subagents_write.jsonl"])
def test_opencode_usage_sums_the_steps(name):
    path = fixture(f"opencode/{name}")
    steps = [r["part"] for r in json_lines(path) if r["type"] == "step_finish"]
    session = load(path)
    read = sum(s["tokens"]["cache"]["read"] for s in steps)
    write_ = sum(s["tokens"]["cache"]["write"] for s in steps)
    assert session.usage == Usage(input_tokens=sum(s["tokens"]["input"] for s in steps) + read + write_,
                                  output_tokens=sum(s["tokens"]["output"] for s in steps), cache_read_tokens=read,
                                  cache_write_tokens=write_,
                                  reasoning_tokens=sum(s["tokens"]["reasoning"] for s in steps))
    assert session.cost_usd == pytest.approx(sum(s["cost"] for s in steps))
    charged = [e for e in session.events if e.usage]  # each step's tokens once, on its last assistant event
    assert added(e.usage for e in charged) == session.usage and charged[0].role == "assistant"


@needs_fixtures
def test_opencode_keeps_every_run_of_a_file():
    path = fixture("opencode/run-json_task-subagents_write.jsonl")
    records = json_lines(path)
    order = list(dict.fromkeys(r["sessionID"] for r in records))
    session = load(path)
    assert len(order) == 3 and [e.text for e in session.events if e.kind == "session"] == order
    assert session.session_id == order[0]
    for ident in order:  # each run's records all became events
        lines = {n for n, r in enumerate(records, 1) if r["sessionID"] == ident}
        assert lines <= {e.line for e in session.events}
    tasks = [c for e in session.events for c in e.tool_calls if c.name == "task"]
    assert len(tasks) == 15 and all(c.subagent for c in tasks)
    writes = [c for e in session.events for c in e.tool_calls if c.name == "write"]
    assert writes and all((c.diff or "").startswith("--- /dev/null\n") for c in writes)


@needs_fixtures
def test_opencode_edit_diff_is_taken_as_given():
    path = fixture("opencode/run-json_edit-todowrite.jsonl")
    given = [r["part"]["state"]["metadata"]["diff"] for r in json_lines(path)
             if r["type"] == "tool_use" and r["part"]["tool"] == "edit"]
    edits = [c for e in load(path).events for c in e.tool_calls if c.name == "edit"]
    assert given and [c.diff for c in edits] == given and all(c.file_path for c in edits)


@needs_fixtures
def test_kimi_usage_comes_from_its_wire_log():
    context = fixture("kimi/context_072b243f_think-shell-edits.jsonl")
    wire = fixture("kimi/wire_072b243f_same-session.jsonl")
    steps = {r["message"]["payload"]["message_id"]: r["message"]["payload"]["token_usage"] for r in json_lines(wire)
             if r.get("message", {}).get("type") == "StatusUpdate"}
    read = sum(u["input_cache_read"] for u in steps.values())
    expected = Usage(input_tokens=sum(u["input_other"] + u["input_cache_read"] + u["input_cache_creation"]
                                      for u in steps.values()),
                     output_tokens=sum(u["output"] for u in steps.values()), cache_read_tokens=read,
                     cache_write_tokens=sum(u["input_cache_creation"] for u in steps.values()))
    alone = load(wire)
    assert alone.usage == expected == added(e.usage for e in alone.events if e.usage)
    assert all(e.role == "assistant" for e in alone.events if e.usage)
    together = kimi.parse_files([context, wire])
    assert together.usage == expected and load(context).usage == expected  # the sibling wire log is found
    assistant = [e for e in together.events if e.role == "assistant"]
    assert all(e.usage for e in assistant) and len(assistant) == len(steps)
    assert parse_file(context).usage == Usage()  # alone, the context file has none
    edits = [c for e in together.events for c in e.tool_calls if c.name in ("StrReplaceFile", "WriteFile")]
    assert len(edits) == 24 and all(c.diff and c.file_path for c in edits)
    assert any(e.reasoning for e in assistant) and sum(1 for e in together.events if e.role == "user") == 12


# --- robustness, on files written here ------------------------------------------------------------------------

INIT = {"type": "system", "subtype": "init", "session_id": "s1", "uuid": "u0", "cwd": "/w", "model": "m",
        "claude_code_version": "2.1.0", "tools": []}


def _assistant(ident: str, *blocks: dict[str, Any], parent: str | None = None) -> list[dict[str, Any]]:
    usage = {"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 10, "output_tokens": 7}
    return [{"type": "assistant", "session_id": "s1", "uuid": f"{ident}-{i}", "parent_tool_use_id": parent,
             "message": {"id": ident, "model": "m", "role": "assistant", "content": [block], "usage": usage}}
            for i, block in enumerate(blocks)]


def test_a_malformed_middle_line_is_a_problem_at_its_line(tmp_path):
    path = write(tmp_path / "t.jsonl", INIT, "{not json", *_assistant("a1", {"type": "text", "text": "hi"}))
    session = load(path)
    assert session.format == "claude" and session.lines == 3
    assert [(p.line, p.message.split(":")[0]) for p in session.problems] == [(2, "not JSON")]
    assert [e.line for e in session.events] == [1, 3] and session.events[1].text == "hi"


def test_a_cut_off_last_line_is_a_problem_and_the_rest_stands(tmp_path):
    path = write(tmp_path / "t.jsonl", INIT, *_assistant("a1", {"type": "text", "text": "hi"}),
                 tail='{"type":"result","subtype":"succ')
    session = load(path)
    assert [p.line for p in session.problems] == [3] and "cut off" in session.problems[0].message
    assert session.completed is False and session.usage == Usage(input_tokens=115, output_tokens=7,
                                                                 cache_read_tokens=100, cache_write_tokens=10)


def test_unknown_records_are_kept_raw(tmp_path):
    odd = {"type": "rate_limit_event", "session_id": "s1", "detail": {"x": 1}}
    path = write(tmp_path / "t.jsonl", INIT, odd, [1, 2], *_assistant("a1", {"type": "text", "text": "hi"}))
    session = load(path)
    raw = [e for e in session.events if e.role == "raw"]
    assert [(e.line, e.raw) for e in raw] == [(2, odd), (3, [1, 2])]
    assert accounted(session) == {1, 2, 3, 4}
    nothing = write(tmp_path / "n.jsonl", {"hello": "world"}, "plain words")
    other = load(nothing)
    assert other.format == "unknown" and [e.raw for e in other.events] == [{"hello": "world"}]
    assert [p.line for p in other.problems] == [2]


def test_detection_reads_past_a_long_run_of_hook_lines(tmp_path):
    hooks = [{"type": "system", "subtype": "hook_started", "hook_id": str(i), "hook_name": "SessionStart",
              "hook_event": "SessionStart"} for i in range(45)]
    path = write(tmp_path / "t.jsonl", *hooks, INIT, *_assistant("a1", {"type": "text", "text": "hi"}))
    assert detect(path) == "claude"
    assert load(path).events[0].kind == "system.hook_started"


def test_huge_lines_are_fine(tmp_path):
    big = "x" * 5_000_000
    path = write(tmp_path / "t.jsonl", INIT, *_assistant("a1", {"type": "text", "text": big}))
    assert load(path).events[1].text == big


def test_claude_diffs_follow_the_file_through_writes_and_edits(tmp_path):
    write_ = {"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": "k.py", "content": "a\nb\nc\n"}}
    edit = {"type": "tool_use", "id": "t2", "name": "Edit",
            "input": {"file_path": "k.py", "old_string": "b", "new_string": "B"}}
    blind = {"type": "tool_use", "id": "t3", "name": "Edit",
             "input": {"file_path": "other.py", "old_string": "x = 1", "new_string": "x = 2"}}
    failed = {"type": "tool_use", "id": "t4", "name": "Edit",
              "input": {"file_path": "k.py", "old_string": "c", "new_string": "C"}}
    error = {"type": "user", "session_id": "s1", "uuid": "r4", "parent_tool_use_id": None,
             "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t4",
                                                       "content": "no such string", "is_error": True}]}}
    again = {"type": "tool_use", "id": "t5", "name": "Write", "input": {"file_path": "k.py", "content": "a\nB\nc\nd\n"}}
    path = write(tmp_path / "t.jsonl", INIT, *_assistant("a1", write_, edit, blind, failed), error,
                 *_assistant("a2", again))
    calls = {c.id: c for e in load(path).events for c in e.tool_calls}
    assert calls["t1"].diff == "--- /dev/null\n+++ b/k.py\n@@ -0,0 +1,3 @@\n+a\n+b\n+c\n"
    assert calls["t2"].diff == f"--- a/k.py{LABEL}\n+++ b/k.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    # a file never seen: the snippet alone, under a bare @@ (where it lies is not known)
    assert calls["t3"].diff == "--- a/other.py\n+++ b/other.py\n@@\n-x = 1\n+x = 2\n"
    assert calls["t4"].diff is None  # its result is an error: nothing changed
    assert calls["t5"].diff == f"--- a/k.py{LABEL}\n+++ b/k.py\n@@ -1,3 +1,4 @@\n a\n B\n c\n+d\n"


def test_claude_subagent_lines_from_a_constructed_stream(tmp_path):
    agent = {"type": "tool_use", "id": "ag1", "name": "Task", "input": {"prompt": "look", "subagent_type": "x"}}
    path = write(tmp_path / "t.jsonl", INIT, *_assistant("a1", agent),
                 {"type": "system", "subtype": "task_started", "task_id": "t", "tool_use_id": "ag1",
                  "task_type": "local_agent", "session_id": "s1", "uuid": "x"},
                 *_assistant("a2", {"type": "text", "text": "inside"}, parent="ag1"))
    session = load(path)
    assert session.events[1].tool_calls[0].subagent
    assert (session.events[2].parent, session.events[2].sidechain) == ("ag1", False)
    assert (session.events[3].parent, session.events[3].sidechain) == ("ag1", True)
    # two ids, once each
    assert session.usage == Usage(input_tokens=230, output_tokens=14, cache_read_tokens=200, cache_write_tokens=20)


def test_legacy_shell_apply_patch_gives_a_diff(tmp_path):
    patch = ("*** Begin Patch\n*** Add File: new.py\n+print(1)\n*** Update File: new.py\n@@\n-print(1)\n+print(2)\n"
             "*** End Patch")
    call = {"type": "function_call", "name": "shell", "call_id": "c1",
            "arguments": json.dumps({"command": ["bash", "-lc", f"apply_patch <<'PATCH'\n{patch}\nPATCH\n"]})}
    path = write(tmp_path / "rollout.jsonl",
                 {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x", "cwd": "/w"}},
                 {"timestamp": "2025-01-01T00:00:01Z", "type": "response_item", "payload": call})
    (found,) = [c for e in load(path).events for c in e.tool_calls]
    assert found.file_path == "new.py"
    assert found.diff == ("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+print(1)\n"
                          f"--- a/new.py{LABEL}\n+++ b/new.py\n@@ -1 +1 @@\n-print(1)\n+print(2)\n")


def test_rooftop_own_transcript(tmp_path):
    from rooftop.agents import transcript as written

    out = io.StringIO()
    writer = written.TranscriptWriter(out)
    writer.emit(written.StartEvent(version="0.1.0", model="qwen", tools=["run_kernel", "read_file", "finish"],
                                   max_turns=5))
    writer.emit(written.MessageEvent(role="system", content="You write fast GPU kernels."))
    writer.emit(written.MessageEvent(role="user", content=PROMPT))
    for n, code in enumerate(["x = 1\n", "x = 2\n"]):
        call = written.ToolCallRecord(id=f"c{n}", name="run_kernel", arguments=json.dumps({"code": code}))
        usage = Usage(input_tokens=100, output_tokens=10, cache_read_tokens=50)
        writer.emit(written.MessageEvent(role="assistant", reasoning="think", tool_calls=[call], usage=usage))
        writer.emit(written.MessageEvent(role="tool", tool_call_id=f"c{n}", content="bench: ok"))
    writer.emit(written.ErrorEvent(message="rate limited", fatal=False, status=429))
    writer.emit(written.ResultEvent(finished=True, reason="finish", turns=2, input_tokens=200, output_tokens=20,
                                    cache_read_tokens=100, wall_s=3.5))
    path = tmp_path / "transcript.jsonl"
    path.write_text(out.getvalue())
    session = load(path)
    assert session.format == "rooftop" and session.model == "qwen" and session.agent == "rooftop 0.1.0"
    assert [e.role for e in session.events] == ["system", "system", "user", "assistant", "tool", "assistant", "tool",
                                                "error", "result"]
    assert session.usage == Usage(input_tokens=200, output_tokens=20, cache_read_tokens=100) and session.completed
    first, second = (c for e in session.events for c in e.tool_calls)
    assert first.diff == "--- /dev/null\n+++ b/solution.py\n@@ -0,0 +1 @@\n+x = 1\n"
    assert second.diff == f"--- a/solution.py{LABEL}\n+++ b/solution.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    assert session.duration_s == 3.5 and session.events[7].kind == "error.retried"
    cut = write(tmp_path / "cut.jsonl", *out.getvalue().splitlines()[:5], tail='{"type":"mess')
    killed = load(cut)
    assert killed.completed is False and killed.usage == Usage(input_tokens=100, output_tokens=10, cache_read_tokens=50)


def test_cursor_stream(tmp_path):
    base = {"session_id": "c1"}
    path = write(tmp_path / "t.jsonl",
                 {"type": "system", "subtype": "init", "apiKeySource": "login", "cwd": "/w", "model": "Sonnet",
                  "permissionMode": "default", **base},
                 {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "go"}]}, **base},
                 {"type": "thinking", "subtype": "delta", "text": "let me ", **base},
                 {"type": "thinking", "subtype": "delta", "text": "look", **base},
                 {"type": "thinking", "subtype": "completed", **base},
                 {"type": "tool_call", "subtype": "started", "call_id": "t1",
                  "tool_call": {"editToolCall": {"args": {"path": "/w/a.py", "streamContent": "x = 1\n"}}}, **base},
                 {"type": "tool_call", "subtype": "completed", "call_id": "t1",
                  "tool_call": {"editToolCall": {"args": {"path": "/w/a.py"}, "result": {"success": {
                      "path": "/w/a.py", "beforeFullFileContent": "x = 0\n", "afterFullFileContent": "x = 1\n"}}}},
                  **base},
                 {"type": "tool_call", "subtype": "completed", "call_id": "t2",
                  "tool_call": {"shellToolCall": {"args": {"command": "false"},
                                                  "result": {"failure": {"exitCode": 1, "stderr": "no"}}}}, **base},
                 {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
                  **base},
                 {"type": "result", "subtype": "success", "is_error": False, "result": "done", "duration_ms": 1500,
                  "usage": {"inputTokens": 100, "outputTokens": 20, "cacheReadTokens": 300, "cacheWriteTokens": 5},
                  **base})
    assert detect(path) == "cursor"
    session = load(path)
    assert session.usage == Usage(input_tokens=405, output_tokens=20, cache_read_tokens=300, cache_write_tokens=5)
    assert session.completed
    thinking = [e for e in session.events if e.kind == "thinking"]
    assert [(e.line, e.reasoning) for e in thinking] == [(3, "let me look")]
    edit = next(c for e in session.events for c in e.tool_calls if c.name == "edit")
    assert edit.diff == f"--- /w/a.py{LABEL}\n+++ /w/a.py\n@@ -1 +1 @@\n-x = 0\n+x = 1\n"
    shell = next(e.tool_result for e in session.events if e.tool_result and e.tool_result.call_id == "t2")
    assert shell.is_error and session.final_text == "done" and session.duration_s == 1.5


def test_gemini_stream(tmp_path):
    at = {"timestamp": "2025-10-01T00:00:00Z"}
    path = write(tmp_path / "t.jsonl", {"type": "init", "session_id": "g1", "model": "gemini-2.5-pro", **at},
                 {"type": "message", "role": "user", "content": "go", **at},
                 {"type": "message", "role": "assistant", "content": "Wri", "delta": True, **at},
                 {"type": "message", "role": "assistant", "content": "ting.", "delta": True, **at},
                 {"type": "tool_use", "tool_name": "write_file", "tool_id": "w1",
                  "parameters": {"file_path": "a.py", "content": "x = 1\n"}, **at},
                 {"type": "tool_result", "tool_id": "w1", "status": "success", "output": "ok", **at},
                 {"type": "tool_result", "tool_id": "w2", "status": "error",
                  "error": {"type": "x", "message": "denied"}, **at},
                 {"type": "result", "status": "success", "stats": {"total_tokens": 1300, "input_tokens": 1200,
                  "output_tokens": 100, "cached": 800, "input": 400, "duration_ms": 5000, "tool_calls": 2}, **at})
    assert detect(path) == "gemini"
    session = load(path)
    assert session.usage == Usage(input_tokens=1200, output_tokens=100, cache_read_tokens=800) and session.completed
    assert [e.text for e in session.events if e.role == "assistant" and e.text] == ["Writing."]
    assert session.events[2].line == 3 and len(session.events) == 7  # the two fragments are one event
    (created,) = [c for e in session.events for c in e.tool_calls]
    assert created.diff == "--- /dev/null\n+++ b/a.py\n@@ -0,0 +1 @@\n+x = 1\n"
    assert [e.tool_result.is_error for e in session.events if e.tool_result] == [False, True]


def test_every_parser_survives_every_fixture_and_garbage(tmp_path):
    garbage = write(tmp_path / "g.jsonl", {"type": 3, "payload": [], "message": "x", "part": None, "role": {}},
                    [], "nope", {"type": "item.completed", "item": {"type": "command_execution"}}, tail="{")
    for path in [garbage, *FILES]:
        for parser in registry().values():
            session = parser.read(path)
            assert session.format == parser.format


def test_records_of_unexpected_shapes_never_stop_a_parser():
    rng = random.Random(7)
    odd = [None, 0, -1, 2.5, True, "", "x", [], {}, [None], {"a": None}, [1, 2]]

    def mutate(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: rng.choice(odd) if rng.random() < 0.2 else mutate(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rng.choice(odd) if rng.random() < 0.2 else mutate(v) for v in value]
        return value

    real = [json.loads(line) for path in FILES if path.suffix == ".jsonl" for line in path.read_text().splitlines()]
    for parser in registry().values():
        picked = [mutate(r) for r in rng.sample(real, min(len(real), 150))]
        session = parser(enumerate(picked, 1))
        assert session.lines == len(picked)
        if not parser.text:  # a text format's events sit at its section markers only
            assert accounted(session) == set(range(1, len(picked) + 1))


def test_a_record_a_parser_trips_over_costs_only_that_record(tmp_path, monkeypatch):
    from rooftop.transcripts.parsers import claude

    def trip(record: dict[str, Any]) -> str:
        raise KeyError("surprise")

    monkeypatch.setattr(claude, "_system_text", trip)
    path = write(tmp_path / "t.jsonl", INIT, *_assistant("a1", {"type": "text", "text": "hi"}))
    session = load(path)
    assert [p.line for p in session.problems] == [1] and "KeyError" in session.problems[0].message
    assert [(e.line, e.role) for e in session.events] == [(1, "raw"), (2, "assistant")]


# --- the fake CLIs ------------------------------------------------------------------------------------------

@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text("class ModelNew:\n    pass\n")
    for tool in ("check", "bench"):
        (ws / tool).write_text(f"#!/bin/sh\necho '{tool}: all shapes ok'\nexit 0\n")
        (ws / tool).chmod(0o755)
    return ws


def _run(argv: list[str], workspace: Path, out: Path, **env: str) -> None:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")])
    with out.open("wb") as stream:
        done = subprocess.run([sys.executable, *argv], cwd=workspace, stdout=stream, stderr=subprocess.PIPE,
                              env={"PATH": path, "HOME": str(workspace.parent), **env}, timeout=120)
    assert done.returncode == 0, done.stderr.decode()


def test_fake_claude_stream(workspace, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _run([str(FAKES / "claude"), "-p", "--output-format", "stream-json", "--verbose", "--model", "honest", "--",
          PROMPT], workspace, run / "transcript.jsonl")
    choice = choose(run)
    assert choice is not None and choice.format == "claude" and choice.path.name == "transcript.jsonl"
    session = load(run)
    calls = 4  # edit, ./check, ./bench, the answer
    assert session.usage == Usage(input_tokens=calls * 1105, output_tokens=calls * 40, cache_read_tokens=calls * 1000,
                                  cache_write_tokens=calls * 100)
    assert added(e.usage for e in session.events if e.usage) == session.usage  # once per message id
    assert session.completed and session.cost_usd == 0.004 and session.final_text == "Done."
    (edit,) = [c for e in session.events for c in e.tool_calls if c.name == "Edit"]
    assert edit.file_path == "solution.py" and "+# tuned" in (edit.diff or "")
    results = [e.tool_result.content for e in session.events if e.tool_result]
    assert "check: all shapes ok\n" in results and "bench: all shapes ok\n" in results


def test_fake_codex_run_folder_prefers_its_rollout(workspace, tmp_path):
    run, home = tmp_path / "run", tmp_path / "codex-home"
    run.mkdir()
    home.mkdir()
    _run([str(FAKES / "codex"), "exec", "--json", "--skip-git-repo-check", "-C", str(workspace), "-m", "honest",
          "--", PROMPT], workspace, run / "transcript.jsonl", CODEX_HOME=str(home))
    (rollout,) = home.rglob("rollout-*.jsonl")
    (run / rollout.name).write_bytes(rollout.read_bytes())
    stream = parse_file(run / "transcript.jsonl")
    assert stream.format == "codex_exec" and stream.completed
    assert stream.usage == Usage(input_tokens=4000, output_tokens=200, cache_read_tokens=3200)
    choice = choose(run)
    assert choice is not None and choice.format == "codex_rollout" and choice.path.name == rollout.name
    session = load(run)
    assert session.format == "codex_rollout" and session.model == "honest" and session.session_id == stream.session_id
    assert session.usage == Usage(input_tokens=4000, output_tokens=200, cache_read_tokens=3200, reasoning_tokens=40)
    (patch,) = [c for e in session.events for c in e.tool_calls if c.name == "apply_patch"]
    assert patch.file_path == "solution.py" and "+# tuned" in (patch.diff or "")
    assert session.completed is True and [e.text for e in session.events if e.role == "user"] == [PROMPT]


def test_kimi_run_folder_reads_context_and_wire(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write(run / "transcript.jsonl", {"role": "assistant", "content": "done"})
    write(run / "context.jsonl", {"role": "_checkpoint", "id": 0}, {"role": "user", "content": "go"},
          {"role": "assistant", "content": [{"type": "think", "think": "hm"}, {"type": "text", "text": "done"}]})
    write(run / "wire.jsonl", {"type": "metadata", "protocol_version": "1.3"},
          {"timestamp": 1.0, "message": {"type": "StatusUpdate", "payload": {"message_id": "m1", "token_usage": {
              "input_other": 10, "input_cache_read": 90, "input_cache_creation": 0, "output": 5}}}})
    choice = choose(run)
    assert choice is not None and choice.path.name == "context.jsonl"
    assert [p.name for p in choice.extra] == ["wire.jsonl"]
    session = load(run)
    assert session.usage == Usage(input_tokens=100, output_tokens=5, cache_read_tokens=90, cache_write_tokens=0)
    assert [(e.role, e.text, e.reasoning) for e in session.events if e.role in ("user", "assistant")] == [
        ("user", "go", None), ("assistant", "done", "hm")]


def test_a_resumed_codex_rollout_counts_both_processes(tmp_path):
    def count(total_in, total_out, last_in, last_out):
        info = {"total_token_usage": {"input_tokens": total_in, "cached_input_tokens": 0, "output_tokens": total_out},
                "last_token_usage": {"input_tokens": last_in, "cached_input_tokens": 0, "output_tokens": last_out}}
        return {"timestamp": "2026-01-01T00:00:00Z", "type": "event_msg",
                "payload": {"type": "token_count", "info": info}}

    meta = {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
            "payload": {"id": "s", "cli_version": "0.77.0", "originator": "codex_cli_rs"}}
    # first process: two calls (100/10, then 150/20); resumed: the total starts again at one call of 200/30
    path = write(tmp_path / "rollout.jsonl", meta, count(100, 10, 100, 10), count(100, 10, 100, 10),
                 count(250, 30, 150, 20), count(200, 30, 200, 30))
    session = load(path)
    assert (session.usage.input_tokens, session.usage.output_tokens) == (450, 60)
    usage = codex_exec.run_usage(tmp_path / "no-stream.jsonl", [path])
    assert usage is not None and (usage.input_tokens, usage.output_tokens, usage.turns) == (450, 60, 3)
    # without a restart the last total stands
    plain = write(tmp_path / "plain.jsonl", meta, count(100, 10, 100, 10), count(250, 30, 150, 20))
    assert (load(plain).usage.input_tokens, load(plain).usage.output_tokens) == (250, 30)


def test_codex_0_171_rollout_records_are_read_not_kept_raw(tmp_path):
    """Codex 0.171 writes a world_state snapshot, thread settings, an item_completed echo of every
    item and a token_usage_record beside each token_count; the prompt is echoed only as a
    UserMessage item, and unified exec reports `Process exited with code N` (these lines are cut
    from a real 0.171 rollout)."""
    at = {"timestamp": "2026-11-29T00:16:25.900Z"}

    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {**at, "ordinal": 0, "type": kind, "payload": payload}

    def usage(n: int) -> dict[str, int]:
        return {"input_tokens": 1000 * n, "cached_input_tokens": 0, "output_tokens": 50 * n,
                "reasoning_output_tokens": 0, "total_tokens": 1050 * n}

    def count(n: int) -> dict[str, Any]:
        return line("event_msg", {"type": "token_count", "info": {"total_token_usage": usage(n),
                                                                   "last_token_usage": usage(1)}})

    def output(call: str, code: int, text: str) -> dict[str, Any]:
        header = f"Chunk ID: 67f03e\nWall time: 0.0000 seconds\nProcess exited with code {code}\n"
        return line("response_item", {"type": "function_call_output", "call_id": call,
                                      "output": f"{header}Original token count: 9\nOutput:\n{text}"})

    prompt = "# Copy\n\nMake solution.py fast."
    path = write(
        tmp_path / "rollout.jsonl",
        line("session_meta", {"id": "t1", "cwd": "/w", "cli_version": "0.171.0", "originator": "codex_exec"}),
        line("event_msg", {"type": "task_started", "turn_id": "u1"}),
        line("response_item", {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": "<environment_context>/w"}]}),
        line("world_state", {"full": True, "state": {"environments": {"local": {"cwd": "/w"}}}}),
        line("turn_context", {"model": "gpt-5.5", "cwd": "/w"}),
        line("event_msg", {"type": "thread_settings_applied",
                           "thread_settings": {"model": "gpt-5.5", "model_provider_id": "scripted"}}),
        line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}),
        line("event_msg", {"type": "item_completed", "item": {"type": "UserMessage", "id": "m0",
                                                              "content": [{"type": "text", "text": prompt}]}}),
        line("response_item", {"type": "function_call", "name": "exec_command", "call_id": "c1",
                               "arguments": json.dumps({"cmd": "./check"})}),
        line("token_usage_record", {"response_id": "r1", "usage": usage(1), "turn_token_usage": usage(1)}),
        line("event_msg", {"type": "item_completed", "item": {"type": "CommandExecution", "id": "c1",
                                                              "exit_code": 1, "status": "completed"}}),
        output("c1", 1, "status: incorrect\n"),
        count(1),
        line("response_item", {"type": "function_call", "name": "exec_command", "call_id": "c2",
                               "arguments": json.dumps({"cmd": "./check"})}),
        line("token_usage_record", {"response_id": "r2", "usage": usage(1), "turn_token_usage": usage(2)}),
        output("c2", 0, "status: correct\n"),
        count(2),
        line("response_item", {"type": "message", "role": "assistant",
                               "content": [{"type": "output_text", "text": "Done."}]}),
        line("token_usage_record", {"response_id": "r3", "usage": usage(1), "turn_token_usage": usage(3)}),
        count(3),
        line("event_msg", {"type": "task_complete", "turn_id": "u1", "last_agent_message": "Done."}))
    assert detect(path) == "codex_rollout"
    session = load(path)
    assert not [e for e in session.events if e.role == "raw"] and not session.problems
    assert accounted(session) == set(range(1, 22))
    assert session.usage == Usage(input_tokens=3000, output_tokens=150, cache_read_tokens=0, cache_write_tokens=None,
                                  reasoning_tokens=0)
    assert session.model == "gpt-5.5" and session.completed is True
    # the human's prompt is the one user event; the injected environment is context
    assert [e.text for e in session.events if e.role == "user"] == [prompt]
    settings = next(e for e in session.events if e.kind == "event_msg.thread_settings_applied")
    assert settings.text == "gpt-5.5 via scripted"
    # unified exec's own exit status says which command failed
    assert [e.tool_result.is_error for e in session.events if e.tool_result] == [True, False]


def test_claude_native_2_1_3xx_request_records_are_bookkeeping(tmp_path):
    """Claude Code 2.1.332's session file has api-request lines (with api-request-blob and
    api-request-shape copies of the request), tools-used, atis-latch and cost-state, whose total
    is the session's cost."""
    base = {"sessionId": "s1", "timestamp": "2026-11-29T00:16:17.278Z", "version": "2.1.332"}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
               "content": [{"type": "text", "text": "Done."}],
               "usage": {"input_tokens": 1000, "output_tokens": 50}}
    path = write(
        tmp_path / "session.jsonl",
        {**base, "type": "atis-latch", "atis": ""},
        {**base, "type": "api-request-shape", "shapeHash": "a2", "shape": {"system": [{"type": "text", "text": "x"}]}},
        {**base, "type": "api-request-blob", "hash": "9f", "message": {"role": "user", "content": "go"}},
        {**base, "type": "api-request", "id": "q1", "querySource": "sdk", "params": {"model": "claude-sonnet-4-5"}},
        {**base, "type": "tools-used", "tools": ["Read", "Write"]},
        {**base, "type": "assistant", "uuid": "u1", "parentUuid": None, "message": message},
        {**base, "type": "cost-state", "totalCostUSD": 0.015, "modelUsage": {}})
    assert detect(path) == "claude_native"
    session = load(path)
    assert not [e for e in session.events if e.role == "raw"] and accounted(session) == set(range(1, 8))
    texts = {e.kind: e.text for e in session.events if e.role == "system"}
    assert texts["api-request"] == "claude-sonnet-4-5" and texts["tools-used"] == "Read, Write"
    assert texts["api-request-blob"] is None and texts["api-request-shape"] is None
    assert session.cost_usd == 0.015 and session.usage == Usage(input_tokens=1000, output_tokens=50,
                                                                cache_read_tokens=None, cache_write_tokens=None)


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_oldest_codex_rollout_shape_is_read(tmp_path):
    """A rollout of a 2025 codex-rs build: a bare metadata line, then bare response items between
    `record_type: state` lines, no envelope and no session_meta (all 50 records were shown raw)."""
    call = {"type": "function_call", "id": "fc_1", "name": "shell", "call_id": "call_1",
            "arguments": json.dumps({"command": ["bash", "-lc", "ls"]})}
    records = [{"id": "5f0c", "timestamp": "2025-08-01T10:00:00.000Z", "instructions": None,
                "git": {"commit_hash": "abc", "branch": "main"}},
               {"record_type": "state"},
               {"type": "message", "id": None, "role": "user", "content": [{"type": "input_text", "text": "list"}]},
               {"record_type": "state"},
               {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look first"}],
                "encrypted_content": "gAAA"},
               call,
               {"type": "function_call_output", "call_id": "call_1",
                "output": json.dumps({"output": "a.py\n", "metadata": {"exit_code": 0, "duration_seconds": 0.1}})},
               {"type": "message", "id": "msg_1", "role": "assistant",
                "content": [{"type": "output_text", "text": "one file"}]},
               {"record_type": "state"}]
    path = _write_jsonl(tmp_path / "rollout-2025-08-01T10-00-00-5f0c.jsonl", records)
    assert detect(path) == "codex_rollout"
    session = load(path)
    assert not [e for e in session.events if e.role == "raw"] and not session.problems
    assert session.session_id == "5f0c"
    assert [e.role for e in session.events if e.role != "system"] == ["user", "assistant", "assistant", "tool",
                                                                      "assistant"]
    assert session.events[-2].text == "one file" and session.final_text == "one file"
    shell = next(e for e in session.events if e.tool_calls)
    assert shell.tool_calls[0].name == "shell" and shell.tool_calls[0].arguments["command"][-1] == "ls"


def test_exec_command_end_events_are_not_shown_again_beside_their_outputs(tmp_path):
    """Codex 0.121 writes an exec_command_end per command, which repeated the call's output as raw
    records; one whose call has no output line (a command the user ran) is that command's result."""

    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload}

    records = [line("session_meta", {"id": "t", "cwd": "/w", "cli_version": "0.121.0"}),
               line("response_item", {"type": "function_call", "name": "exec_command", "call_id": "c1",
                                      "arguments": json.dumps({"cmd": "ls"})}),
               line("event_msg", {"type": "exec_command_begin", "call_id": "c1", "command": ["ls"]}),
               line("event_msg", {"type": "exec_command_end", "call_id": "c1", "command": ["ls"], "exit_code": 0,
                                  "stdout": "a.py\n", "stderr": "", "aggregated_output": "a.py\n"}),
               line("response_item", {"type": "function_call_output", "call_id": "c1",
                                      "output": "Process exited with code 0\nOutput:\na.py\n"}),
               line("event_msg", {"type": "exec_command_end", "call_id": "user1", "command": ["git", "status"],
                                  "exit_code": 1, "aggregated_output": "fatal: not a git repository\n"})]
    session = load(_write_jsonl(tmp_path / "rollout.jsonl", records))
    assert not [e for e in session.events if e.role == "raw"]
    outputs = [e for e in session.events if e.tool_result is not None]
    assert [o.tool_result.call_id for o in outputs] == ["c1", "user1"]
    user_ran = outputs[1]
    assert user_ran.text == "$ git status" and user_ran.tool_result.is_error
    assert "not a git repository" in user_ran.tool_result.content


def test_a_command_the_user_ran_and_a_repeated_final_answer_are_shown_once(tmp_path):
    """Codex 0.121 hands the model a `<user_shell_command>` message repeating the output of a
    command the user ran with `!`, and each turn's task_complete repeats its final answer: both
    were shown a second time."""

    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload}

    echo = "<user_shell_command>\n<command>\nnmp install\n</command>\n<result>\nExit code: 1\nnot found\n</result>"
    records = [line("session_meta", {"id": "t", "cwd": "/w", "cli_version": "0.121.0"}),
               line("event_msg", {"type": "exec_command_end", "call_id": "u1", "command": ["nmp", "install"],
                                  "exit_code": 1, "aggregated_output": "not found\n", "source": "user_shell"}),
               line("response_item", {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": echo}]}),
               line("event_msg", {"type": "user_message", "message": "fix it"}),
               line("response_item", {"type": "message", "role": "user",
                                      "content": [{"type": "input_text", "text": "fix it"}]}),
               line("response_item", {"type": "message", "role": "assistant",
                                      "content": [{"type": "output_text", "text": "Session closed."}]}),
               line("event_msg", {"type": "task_complete", "last_agent_message": "Session closed."})]
    session = load(_write_jsonl(tmp_path / "rollout.jsonl", records))
    texts = [e.text for e in session.events if e.text]
    assert sum("not found" in t for t in texts + [e.tool_result.content for e in session.events
                                                   if e.tool_result]) == 1
    assert texts.count("Session closed.") == 1 and session.final_text == "Session closed."
    assert session.completed is True


def test_the_oldest_codex_shape_tells_injected_context_from_prompts_and_estimates_its_calls(tmp_path):
    """Without prompt echoes, AGENTS.md and the environment were shown as the human's prompts, and
    the turns card counted every reasoning, message and call item as a model call."""
    call = {"type": "function_call", "name": "shell", "call_id": "c1", "arguments": "{}"}
    def said(text: str) -> dict[str, Any]:
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}

    records = [{"id": "5f0c", "timestamp": "2025-08-01T10:00:00.000Z", "instructions": None},
               said("<user_instructions>be brief</user_instructions>"),
               said("<environment_context>/w</environment_context>"), said("list"),
               {"type": "reasoning", "summary": [{"type": "summary_text", "text": "look"}]},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "listing"}]},
               call, {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
               {"type": "reasoning", "summary": [{"type": "summary_text", "text": "done"}]},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one file"}]}]
    session = load(_write_jsonl(tmp_path / "rollout-2025-08-01.jsonl", records))
    assert [e.text for e in session.events if e.role == "user"] == ["list"]
    assert model_calls(session) == Turns(2, 0, estimated=True)


def test_small_things_real_files_showed(tmp_path):
    """A Codex turn that hit its retry limit ended with an empty task_complete and looked complete;
    a Kimi context (no times of its own) showed no wall time beside a timed wire log; Claude Code
    2.1.87's ai-title record was shown raw."""
    def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": "2026-01-01T00:00:00.000Z", "type": kind, "payload": payload}

    codex = load(_write_jsonl(tmp_path / "rollout.jsonl", [
        line("session_meta", {"id": "t", "cwd": "/w"}), line("event_msg", {"type": "task_started"}),
        line("event_msg", {"type": "error", "message": "exceeded retry limit, last status: 429"}),
        line("event_msg", {"type": "task_complete", "last_agent_message": None})]))
    assert codex.completed is False
    timed_out = load(_write_jsonl(tmp_path / "old.jsonl", [
        {"id": "5f0c", "timestamp": "2025-08-01T10:00:00.000Z", "instructions": None},
        {"type": "function_call", "name": "shell", "call_id": "c1", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": "failed in sandbox MacosSeatbelt with execution error: command timed out"}]))
    assert [e.tool_result.is_error for e in timed_out.events if e.tool_result] == [True]
    kimi = tmp_path / "kimi"
    kimi.mkdir()
    _write_jsonl(kimi / "context.jsonl", [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}])
    _write_jsonl(kimi / "wire.jsonl", [{"type": "metadata", "protocol_version": "1.3"},
                                       {"timestamp": 1772682282.5, "message": {"type": "TurnBegin", "payload": {}}},
                                       {"timestamp": 1772682312.0, "message": {"type": "TurnEnd", "payload": {}}}])
    assert load(kimi / "context.jsonl").duration_s == 29.5
    claude = load(_write_jsonl(tmp_path / "claude.jsonl", [
        {"type": "ai-title", "sessionId": "s1", "aiTitle": "Set up the project"},
        {"type": "user", "sessionId": "s1", "parentUuid": None, "uuid": "u1",
         "message": {"role": "user", "content": "hello"}}]))
    assert not [e for e in claude.events if e.role == "raw"]
    assert any(e.text == "Set up the project" for e in claude.events)
    sub = tmp_path / "sub.json"
    sub.write_text(json.dumps({"sessionId": "tw", "projectHash": "p", "startTime": "2026-04-13T21:51:21Z",
                               "kind": "subagent", "messages": [{"id": "1", "timestamp": "2026-04-13T21:51:22Z",
                                                                 "type": "user", "content": "look"}]}))
    assert load(sub).agent == "gemini-cli (a subagent's record)"


def test_codex_hunks_without_line_numbers_are_shown_as_the_patch_gives_them(tmp_path):
    """A bare `@@` hunk of a file the transcript never showed was labelled `@@ -1,12 +1,12 @@`, and the
    next `-13,2`: line numbers invented for hunks that were not at the top of the file."""
    patch = ("*** Begin Patch\n*** Update File: spec.md\n@@ ## User Stories\n-User Story 2 - Sharded Worker Routing\n"
             "+User Story 2 - Worker Routing\n@@\n keep\n-drop\n*** End Patch\n")
    line = {"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item",
            "payload": {"type": "custom_tool_call", "name": "apply_patch", "call_id": "p1", "input": patch}}
    meta = {"timestamp": "2026-01-01T00:00:00.000Z", "type": "session_meta", "payload": {"id": "t"}}
    (call,) = [c for e in load(_write_jsonl(tmp_path / "r.jsonl", [meta, line])).events for c in e.tool_calls]
    assert call.diff == ("--- a/spec.md\n+++ b/spec.md\n@@ ## User Stories\n-User Story 2 - Sharded Worker Routing\n"
                         "+User Story 2 - Worker Routing\n@@\n keep\n-drop\n")
    assert paths(call.diff) == ["spec.md"]


def test_the_gemini_cli_s_own_chat_record_is_read(tmp_path):
    """Gemini CLI's saved session (Harbor's gemini-cli.trajectory.json) is one pretty-printed JSON
    document: it was read as 553 lines of nothing, format unknown, exit 0."""
    record = {"sessionId": "f86f", "projectHash": "79b6", "startTime": "2026-01-01T10:00:00.000Z",
              "lastUpdated": "2026-01-01T10:01:30.000Z", "messages": [
                  {"id": "m1", "timestamp": "2026-01-01T10:00:00.000Z", "type": "user", "content": "fix it"},
                  {"id": "m2", "timestamp": "2026-01-01T10:00:05.000Z", "type": "gemini", "content": "",
                   "thoughts": [{"subject": "Plan", "description": "write the file",
                                 "timestamp": "2026-01-01T10:00:04.000Z"}],
                   "tokens": {"input": 1200, "output": 40, "cached": 1000, "thoughts": 25, "tool": 0, "total": 1265},
                   "model": "gemini-2.5-pro",
                   "toolCalls": [{"id": "write-1", "name": "write_file", "status": "success",
                                  "timestamp": "2026-01-01T10:00:06.000Z",
                                  "args": {"file_path": "/w/solution.py", "content": "x = 1\n"},
                                  "result": [{"functionResponse": {"id": "write-1", "name": "write_file",
                                                                   "response": {"output": "wrote 1 line"}}}]},
                                 {"id": "sh-1", "name": "run_shell_command", "status": "error",
                                  "timestamp": "2026-01-01T10:00:07.000Z", "args": {"command": "./check"},
                                  "result": [{"functionResponse": {"id": "sh-1", "name": "run_shell_command",
                                                                   "response": {"error": "exit 1"}}}]}]},
                  {"id": "m3", "timestamp": "2026-01-01T10:01:00.000Z", "type": "info", "content": "retrying"},
                  {"id": "m4", "timestamp": "2026-01-01T10:01:30.000Z", "type": "gemini", "content": "done",
                   "tokens": {"input": 1400, "output": 3, "cached": 1200, "total": 1403}, "model": "gemini-2.5-pro"}]}
    path = tmp_path / "gemini-cli.trajectory.json"
    path.write_text(json.dumps(record, indent=2))
    assert detect(path) == "gemini_native"
    session = load(path)
    assert session.lines == 4 and not session.problems and not [e for e in session.events if e.role == "raw"]
    assert [e.role for e in session.events] == ["user", "assistant", "tool", "tool", "system", "assistant"]
    think = session.events[1]
    assert think.reasoning == "Plan: write the file" and think.tool_calls[0].file_path == "/w/solution.py"
    assert think.tool_calls[0].diff == "--- /dev/null\n+++ /w/solution.py\n@@ -0,0 +1 @@\n+x = 1\n"
    assert session.events[2].tool_result.content == "wrote 1 line"
    assert session.events[3].tool_result.is_error and session.events[3].tool_result.content == "exit 1"
    # thoughts are billed as output and counted apart from it: the output counts both
    assert session.usage == Usage(input_tokens=2600, output_tokens=68, cache_read_tokens=2200, reasoning_tokens=25)
    assert session.model == "gemini-2.5-pro" and session.duration_s == 90 and session.final_text == "done"
    assert session.completed is None and session.session_id == "f86f"
    # beside a run's transcript, under agent_files/, it is found as .json
    run = tmp_path / "run"
    (run / "agent_files" / ".gemini" / "tmp" / "79b6" / "chats").mkdir(parents=True)
    (run / "agent_files" / ".gemini" / "tmp" / "79b6" / "chats" / "session-1.json").write_text(path.read_text())
    assert load(run).format == "gemini_native"


def test_kimi_subagents_are_nested_under_the_call_that_started_them(tmp_path):
    """The `context_sub_N.jsonl` files beside a Kimi context were never read."""

    def call(ident: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"type": "function", "id": ident, "function": {"name": name, "arguments": json.dumps(args)}}

    main = [{"role": "user", "content": "look around"},
            {"role": "assistant", "content": "delegating", "tool_calls": [call("t1", "Task", {"prompt": "list"})]},
            {"role": "tool", "tool_call_id": "t1", "content": "two files"},
            {"role": "assistant", "content": "again", "tool_calls": [call("t2", "Agent", {"prompt": "read"})]},
            {"role": "tool", "tool_call_id": "t2", "content": "agent_id: a1b2c3d4\nstatus: done\nread it"},
            {"role": "assistant", "content": "done"}]
    _write_jsonl(tmp_path / "context.jsonl", main)
    _write_jsonl(tmp_path / "context_sub_1.jsonl", [{"role": "user", "content": "list"},
                                                     {"role": "assistant", "content": "a.py b.py"}])
    (tmp_path / "subagents" / "a1b2c3d4").mkdir(parents=True)
    _write_jsonl(tmp_path / "subagents" / "a1b2c3d4" / "context.jsonl",
                 [{"role": "user", "content": "read"}, {"role": "assistant", "content": "it says hi"}])
    session = load(tmp_path / "context.jsonl")
    nested = {(e.parent, e.text) for e in session.events if e.sidechain}
    assert nested == {("t1", "list"), ("t1", "a.py b.py"), ("t2", "read"), ("t2", "it says hi")}
    assert session.final_text == "done" and session.lines == 10
    # a folder holding the session picks the main context, not a subagent's
    assert load(tmp_path).events[0].text == "look around"


def test_kimi_sub_files_are_numbered_by_the_wire_log_s_tasks(tmp_path):
    """A real session's context held 2 Task calls beside 9 context_sub files: the wire log's
    SubagentEvents, by task_tool_call_id in order of first appearance, say which file is whose."""

    def task(ident: str) -> dict[str, Any]:
        return {"type": "function", "id": ident, "function": {"name": "Task", "arguments": "{}"}}

    _write_jsonl(tmp_path / "context.jsonl", [{"role": "user", "content": "go"},
                                              {"role": "assistant", "content": "", "tool_calls": [task("tA")]},
                                              {"role": "assistant", "content": "", "tool_calls": [task("tB")]}])
    for n, said in ((1, "first started"), (2, "second started")):
        _write_jsonl(tmp_path / f"context_sub_{n}.jsonl", [{"role": "assistant", "content": said}])

    def event(ident: str) -> dict[str, Any]:
        return {"timestamp": 1.0, "message": {"type": "SubagentEvent", "payload": {
            "task_tool_call_id": ident, "event": {"type": "StepBegin", "payload": {"n": 1}}}}}

    _write_jsonl(tmp_path / "wire.jsonl", [{"type": "metadata", "protocol_version": "1.3"},
                                           event("tB"), event("tA"), event("tB")])
    session = load(tmp_path / "context.jsonl")
    assert {(e.parent, e.text) for e in session.events if e.sidechain} == {("tB", "first started"),
                                                                          ("tA", "second started")}
    # newer CLIs name the starting call `parent_tool_call_id`, beside an agent_id
    newer = [{"timestamp": 1.0, "message": {"type": "SubagentEvent", "payload": {
        "parent_tool_call_id": ident, "agent_id": "a1", "event": {"type": "StepBegin", "payload": {"n": 1}}}}}
        for ident in ("tB", "tA")]
    _write_jsonl(tmp_path / "wire.jsonl", [{"type": "metadata", "protocol_version": "1.9"}, *newer])
    session = load(tmp_path / "context.jsonl")
    assert {(e.parent, e.text) for e in session.events if e.sidechain} == {("tB", "first started"),
                                                                          ("tA", "second started")}


def test_kimi_usage_goes_to_the_step_that_made_each_message_s_calls_and_subagents_count_theirs(tmp_path):
    """A real session's wire log had 81 steps where its context held 79 messages: handed out by
    position, 14 messages showed the step before theirs. Its subagents' usage, inside their
    SubagentEvents, was left out of the session's totals."""

    def call(ident: str, name: str = "Shell") -> dict[str, Any]:
        return {"type": "function", "id": ident, "function": {"name": name, "arguments": "{}"}}

    def wire(kind: str, payload: dict[str, Any], task: str | None = None) -> dict[str, Any]:
        message = {"type": kind, "payload": payload}
        if task is not None:
            message = {"type": "SubagentEvent", "payload": {"task_tool_call_id": task, "event": message}}
        return {"timestamp": 1.0, "message": message}

    def step(n: int, calls: list[str], inp: int, out: int, task: str | None = None) -> list[dict[str, Any]]:
        return [wire("StepBegin", {"n": n}, task), *(wire("ToolCall", {"id": c, "function": {"name": "Shell"}}, task)
                                                     for c in calls),
                wire("StatusUpdate", {"message_id": f"m{task}{n}", "token_usage": {"input_other": inp, "output": out}},
                     task)]

    _write_jsonl(tmp_path / "context.jsonl", [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        # the step that started the task (c2, t1) is in the wire log only
        {"role": "assistant", "content": "", "tool_calls": [call("c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": "ok"},
        {"role": "assistant", "content": "done"}])
    _write_jsonl(tmp_path / "context_sub_1.jsonl", [{"role": "user", "content": "sub"},
                                                     {"role": "assistant", "content": "", "tool_calls": [call("s1")]},
                                                     {"role": "assistant", "content": "sub done"}])
    _write_jsonl(tmp_path / "wire.jsonl", [
        {"type": "metadata", "protocol_version": "1.3"},
        *step(1, ["c1"], 100, 10), *step(2, ["c2", "t1"], 200, 20),
        *step(1, ["s1"], 1000, 100, task="t1"), *step(2, [], 2000, 200, task="t1"),
        *step(3, ["c3"], 300, 30), *step(4, [], 400, 40)])
    session = load(tmp_path / "context.jsonl")
    main = [(e.text or e.tool_calls[0].id, e.usage.input_tokens if e.usage else None)
            for e in session.events if e.role == "assistant" and not e.sidechain]
    assert main == [("c1", 100), ("c3", 300), ("done", 400)]
    sub = [e.usage.input_tokens for e in session.events if e.role == "assistant" and e.sidechain and e.usage]
    assert sub == [1000, 2000]
    # every step, the subagent's included
    assert (session.usage.input_tokens, session.usage.output_tokens) == (4000, 400)
    assert model_calls(session) == Turns(3, 2)


def test_the_gemini_cli_s_chat_record_as_json_lines_is_read(tmp_path):
    """Newer Gemini CLIs write the chat record as lines: a header, messages, and `$set` updates."""
    lines = [{"sessionId": "e435", "projectHash": "d5ee", "startTime": "2026-04-25T08:23:24.509Z",
              "lastUpdated": "2026-04-25T08:23:24.509Z", "kind": "main"},
             {"id": "1", "timestamp": "2026-04-25T08:23:27.899Z", "type": "info", "content": "MCP issues"},
             {"$set": {"lastUpdated": "2026-04-25T08:23:27.900Z"}},
             {"id": "2", "timestamp": "2026-04-25T08:26:42.354Z", "type": "user", "content": [{"text": "connect"}]},
             {"id": "3", "timestamp": "2026-04-25T08:26:50.000Z", "type": "gemini", "content": "ok",
              "tokens": {"input": 900, "output": 12, "cached": 0, "total": 912}, "model": "gemini-3-pro"},
             {"$set": {"lastUpdated": "2026-04-25T08:26:50.100Z"}}]
    session = load(_write_jsonl(tmp_path / "session.jsonl", lines))
    assert session.format == "gemini_native" and not [e for e in session.events if e.role == "raw"]
    assert [e.role for e in session.events] == ["system", "user", "assistant"]
    assert session.events[1].line == 4 and session.events[1].text == "connect"
    assert session.usage.input_tokens == 900 and session.duration_s == 205.591 and session.session_id == "e435"


def test_gemini_messages_written_through_set_lines_are_read_once_each(tmp_path):
    """A real a2a-server record wrote every message inside `{"$set": {"messages": [...]}}`, after
    repeated headers: the page showed no events at all, and its start was the last header's."""
    def header(at: str) -> dict[str, Any]:
        return {"sessionId": "a2a", "projectHash": "p", "startTime": at, "lastUpdated": at, "kind": "main"}

    first = {"id": "m1", "timestamp": "2026-08-16T07:02:01.285Z", "type": "user", "content": [{"text": "set up"}]}
    reply = {"id": "m2", "timestamp": "2026-08-16T07:02:40.000Z", "type": "gemini", "content": "ready",
             "tokens": {"input": 50, "output": 5, "thoughts": 7}}
    lines = [header("2026-08-16T07:02:01.271Z"), {"$set": {"messages": [first]}},
             header("2026-08-16T07:02:49.000Z"), {"$set": {"messages": [first, reply],
                                                            "lastUpdated": "2026-08-16T07:02:50.000Z"}}]
    session = load(_write_jsonl(tmp_path / "session.jsonl", lines))
    assert [(e.role, e.text) for e in session.events] == [("user", "set up"), ("assistant", "ready")]
    assert session.usage.output_tokens == 12 and session.usage.reasoning_tokens == 7  # thoughts are output too
    assert session.started_at is not None and session.started_at.second == 1
