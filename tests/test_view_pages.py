"""`rooftop view` says when a page is not a whole reading of its transcript, and folds what would
bury the first screen (read without a browser: tests/test_viewer.py loads pages in Chromium)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rooftop.agents.record import AgentRun
from rooftop.transcripts.detect import load
from rooftop.viewer.pages import FOLD_CHARS, Compact, Folded, _items, run_page


def _view(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rooftop", "view", *args], capture_output=True, text=True,
                          timeout=120)


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_long_single_line_is_folded_by_its_length():
    """A 17.5 KB single-line hook response (escaped newlines) was shown whole: folding counted lines."""
    blob = "x" * 17_500
    folded = Folded.of(blob)
    assert folded is not None and folded.head == blob[:FOLD_CHARS] and folded.head + folded.rest == blob
    assert folded.more == 17_500 - FOLD_CHARS and folded.unit == "characters"
    many = Folded.of("\n".join(["line"] * 100))
    assert many is not None and many.unit == "lines" and many.more == 60


def test_records_with_nothing_to_show_but_their_kind_fold_into_one_row(tmp_path):
    """Codex pages held hundreds of header-only boxes (token counts, turn contexts)."""
    meta = {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
            "payload": {"id": "t1", "cwd": "/w", "cli_version": "0.57.0", "originator": "codex_cli_rs"}}
    say = {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item",
           "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}}
    context = {"timestamp": "2026-01-01T00:00:01Z", "type": "turn_context", "payload": {"cwd": "/w", "model": "m"}}
    tokens = {"timestamp": "2026-01-01T00:00:02Z", "type": "event_msg",
              "payload": {"type": "token_count", "info": None}}
    session = load(_jsonl(tmp_path / "rollout.jsonl", [meta, context, tokens, tokens, tokens, say, tokens]))
    items = _items(session)
    rows = [i for i in items if isinstance(i, Compact)]
    assert rows and all(len(r.items) >= 1 for r in rows)
    assert any("×3" in r.summary for r in rows), [r.summary for r in rows]
    assert any(not isinstance(i, Compact) and i.event.text == "done" for i in items)


def test_a_page_of_mostly_uninterpreted_records_says_so_and_exits_1(tmp_path):
    records = [{"kind": "mystery", "n": n} for n in range(9)] + [{"type": "result", "result": "x"}]
    transcript = _jsonl(tmp_path / "odd.jsonl", records)
    done = _view(str(transcript), "-o", str(tmp_path / "odd.html"))
    assert done.returncode == 1, done.stderr
    assert "partial page" in done.stderr and "records were interpreted" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert 'id="partial"' in (tmp_path / "odd.html").read_text()


def test_a_page_without_a_single_event_is_partial_too(tmp_path):
    """A chat record whose messages the reader missed showed an empty timeline with no banner."""
    header = {"sessionId": "s", "projectHash": "p", "startTime": "2026-08-16T07:02:01Z", "kind": "main"}
    transcript = _jsonl(tmp_path / "session.jsonl", [header, {"$set": {"lastUpdated": "2026-08-16T07:03:01Z"}}])
    done = _view(str(transcript), "-o", str(tmp_path / "s.html"))
    assert done.returncode == 1 and "gave an event" in done.stderr, done.stderr


def test_a_failed_tool_result_with_no_output_keeps_its_row_and_error_badge(tmp_path):
    """A call that failed with empty output was folded into the grey row of header-only records."""
    meta = {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "t1", "cwd": "/w"}}
    call = {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item",
            "payload": {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}}
    out = {"timestamp": "2026-01-01T00:00:02Z", "type": "response_item", "payload": {
        "type": "function_call_output", "call_id": "c1", "output": json.dumps({"output": "", "metadata": {
            "exit_code": 1}})}}
    session = load(_jsonl(tmp_path / "rollout.jsonl", [meta, call, out]))
    failed = [e for e in session.events if e.tool_result is not None]
    assert failed and failed[0].tool_result.is_error
    assert any(not isinstance(i, Compact) and i.event is failed[0] for i in _items(session))


def test_a_gemini_call_s_thoughts_are_counted_as_output_and_shown(tmp_path):
    """Gemini counts thoughts apart from the answer, both billed as output: a page showed 2,310
    output tokens of a session that also thought 13,677."""
    record = {"sessionId": "s", "projectHash": "p", "startTime": "2026-04-06T00:47:00Z", "messages": [
        {"id": "1", "timestamp": "2026-04-06T00:47:01Z", "type": "user", "content": "go"},
        {"id": "2", "timestamp": "2026-04-06T00:47:09Z", "type": "gemini", "content": "done",
         "tokens": {"input": 100, "output": 10, "thoughts": 90}}]}
    path = tmp_path / "session.json"
    path.write_text(json.dumps(record))
    html = run_page(path).html
    assert "out 100 (reasoning 90)" in html and "of which reasoning 90" in html


def test_two_subagents_started_by_one_message_are_shown_apart(tmp_path):
    """Kimi started two Task calls in one message: both subagents' events shared one block."""
    def task(ident: str, prompt: str) -> dict:
        return {"type": "function", "id": ident, "function": {"name": "Task", "arguments": json.dumps(
            {"prompt": prompt})}}

    _jsonl(tmp_path / "context.jsonl", [{"role": "user", "content": "go"},
                                        {"role": "assistant", "content": "", "tool_calls": [
                                            task("tA", "read the docs"), task("tB", "write the tests")]}])
    for n, said in ((1, "docs read"), (2, "tests written")):
        _jsonl(tmp_path / f"context_sub_{n}.jsonl", [{"role": "assistant", "content": said}])
    session = load(tmp_path / "context.jsonl")
    [started] = [i for i in _items(session) if not isinstance(i, Compact) and i.event.tool_calls]
    assert started.grouped and len(started.children) == 2
    groups = {g.event.text: [c.event.text for c in g.children] for g in started.children}
    assert groups == {"Task tA: read the docs": ["docs read"], "Task tB: write the tests": ["tests written"]}


def test_a_folder_that_is_not_a_run_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "notes.md").write_text("hello\n")
    done = _view(str(tmp_path))
    assert done.returncode == 2 and "not a run folder" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "view.html").exists()


def test_a_command_agent_s_plain_output_is_shown_as_its_messages(tmp_path):
    """Runs of the `command` adapter rendered empty: raw records only, the output under unread lines."""
    run = tmp_path / "run"
    run.mkdir()
    record = AgentRun(id="r1", agent="mine", adapter="command", problem="scale", started_at="2026-01-01T00:00:00Z",
                      completed=True, transcript="transcript.jsonl", folder=str(run))
    (run / "run.json").write_text(record.model_dump_json())
    (run / "transcript.jsonl").write_text("reading the problem\nwriting solution.py\n\n"
                                          "running ./check\ncorrect, speedup 1.2x\n\n" + "\n".join(
                                              f"log {i}" for i in range(26)) + "\n")
    page = run_page(run)
    assert page.partial is None
    session = load(run)
    assert session.format == "text"
    assert [e.role for e in session.events] == ["assistant"] * 3
    assert session.events[1].text == "running ./check\ncorrect, speedup 1.2x"
    assert "unread lines (0)" in page.html and "writing solution.py" in page.html
    done = _view(str(run))
    assert done.returncode == 0, done.stderr


def test_turns_are_shown_beside_the_transcript_s_own_count_and_say_what_each_counts(tmp_path):
    """59 turns were shown against the result's num_turns 67, with no word said."""
    init = {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-x", "tools": []}

    def said(n: int, sidechain: bool = False) -> dict:
        return {"type": "assistant", "parent_tool_use_id": "toolu_1" if sidechain else None,
                "message": {"id": f"msg_{n}", "role": "assistant", "model": "claude-x",
                            "content": [{"type": "text", "text": f"step {n}"}],
                            "usage": {"input_tokens": 10, "output_tokens": 5}}}

    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 7, "result": "done",
              "usage": {"input_tokens": 30, "output_tokens": 15}}
    transcript = _jsonl(tmp_path / "cc.jsonl", [init, said(1), said(2), said(3, sidechain=True), result])
    html = run_page(transcript).html
    card = html[html.index('id="turns"'):]
    card = card[:card.index("</div>")]
    assert "<b>2</b>" in card and "+1 in subagents" in card
    assert "the transcript says 7 (num_turns in its result line)" in card


def test_a_message_split_over_lines_counts_its_last_line_s_usage_once(tmp_path):
    """Claude Code 2.x writes one line per content block with the same message id; the first
    line's output count is a placeholder ("out 3" where the last line says 197)."""

    def block(content: dict, output: int) -> dict:
        return {"type": "assistant", "sessionId": "s1", "parentUuid": "u0", "uuid": f"u{output}",
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {"id": "msg_1", "role": "assistant", "model": "claude-x", "content": [content],
                            "usage": {"input_tokens": 4, "cache_read_input_tokens": 100, "output_tokens": output}}}

    lines = [{"type": "user", "sessionId": "s1", "parentUuid": None, "uuid": "u0", "timestamp": "2026-01-01T00:00:00Z",
              "message": {"role": "user", "content": "go"}},
             block({"type": "thinking", "thinking": "hm"}, 3),
             block({"type": "text", "text": "writing it"}, 3),
             block({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "./check"}}, 197)]
    session = load(_jsonl(tmp_path / "native.jsonl", lines))
    charged = [e.usage for e in session.events if e.usage is not None]
    assert len(charged) == 1 and charged[0].output_tokens == 197 and charged[0].input_tokens == 104
    assert session.usage.output_tokens == 197


def test_a_json_document_of_no_known_format_is_not_read_as_plain_text(tmp_path):
    """A 2025 Codex build's `{"session", "items"}` rollout, pretty-printed, was shown as the agent's
    messages, one per block of JSON lines, and looked complete."""
    path = tmp_path / "rollout-2025-08-23.json"
    path.write_text(json.dumps({"session": {"id": "x", "timestamp": "2025-08-23T11:03:20.415Z"},
                                "items": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}, indent=2))
    assert load(path).format == "unknown"
    done = _view(str(path), "-o", str(tmp_path / "x.html"))
    assert done.returncode == 1 and "partial page" in done.stderr


def test_a_subagent_whose_call_the_transcript_lacks_is_still_one_nested_block(tmp_path):
    """A real Kimi session held 9 subagents' files but only 2 of their Task calls: the other 7
    subagents' events were shown loose on the timeline."""
    (tmp_path / "context.jsonl").write_text(json.dumps({"role": "user", "content": "go"}) + "\n")
    (tmp_path / "context_sub_1.jsonl").write_text(
        "".join(json.dumps({"role": "assistant", "content": t}) + "\n" for t in ("one", "two")))
    (tmp_path / "wire.jsonl").write_text(
        json.dumps({"type": "metadata", "protocol_version": "1.3"}) + "\n" + json.dumps(
            {"timestamp": 1.0, "message": {"type": "SubagentEvent", "payload": {"task_tool_call_id": "gone"}}}) + "\n")
    items = _items(load(tmp_path / "context.jsonl"))
    holders = [i for i in items if not isinstance(i, Compact) and i.event.kind == "subagent"]
    assert len(holders) == 1 and "gone" in (holders[0].event.text or "")
    assert [c.event.text for c in holders[0].children if not isinstance(c, Compact)] == ["one", "two"]
