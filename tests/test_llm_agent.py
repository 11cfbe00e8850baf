"""The built-in agent (`python -m rooftop.agents.llm`) against a scripted endpoint on loopback, in a
workspace whose ./bench is a shell script, and its adapter reading what it leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rooftop.agents import llm, llm_tools
from rooftop.agents.adapters import adapter
from rooftop.agents.adapters.llm import ADAPTER
from rooftop.agents.transcript import (
    ErrorEvent,
    MessageEvent,
    ResultEvent,
    StartEvent,
    read_transcript,
)
from rooftop.transcripts.usage import Usage
from tests.fakes.openai_server import Reply, ScriptedLLM, ToolCall

PROMPT = "# Task\nWrite ModelNew for a softmax.\n"
BENCH = """#!/bin/sh
case "$(cat solution.py)" in
  *SLEEP*) sleep 30 ;;
esac
echo "key=${OPENAI_API_KEY:-hidden}"
if grep -q MARKER_OK solution.py; then
  echo "status: correct"; echo "speedup: 2.5x"; exit 0
fi
echo "status: incorrect"; echo "max abs error 0.5 at shape 0" >&2; exit 1
"""
GOOD = "# MARKER_OK\nclass ModelNew:\n    pass\n"
BAD = "class ModelNew:\n    pass\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "PROMPT.md").write_text(PROMPT)
    (ws / "reference.py").write_text("class Model: ...\n")
    (ws / "solution.py").write_text("# starter\n")
    for name in ("bench", "check"):
        (ws / name).write_text(BENCH)
        (ws / name).chmod(0o755)
    (tmp_path / "secret.txt").write_text("outside\n")
    (ws / "escape").symlink_to(tmp_path / "secret.txt")
    return ws


def run_agent(ws: Path, server: ScriptedLLM, *args: str, key: str = "k") -> tuple[subprocess.CompletedProcess[str],
                                                                                   list[Any]]:
    env = {**os.environ, "OPENAI_API_KEY": key}
    env.pop("OPENAI_BASE_URL", None)
    proc = subprocess.run([sys.executable, "-m", "rooftop.agents.llm", "--model", "scripted-1", "--base-url",
                           server.url, "--backoff", "0.01", *args], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=120)
    transcript = ws.parent / "transcript.jsonl"
    transcript.write_text(proc.stdout)
    return proc, read_transcript(transcript)


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def result_of(events: list[Any]) -> ResultEvent:
    assert isinstance(events[-1], ResultEvent), events[-1]
    return events[-1]


def test_run_kernel_feedback_then_finish(workspace: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("run_kernel", {"code": BAD})], prompt_tokens=100, completion_tokens=20),
              Reply(content="fixing", tool_calls=[ToolCall("run_kernel", {"code": GOOD})], prompt_tokens=300,
                    completion_tokens=40),
              Reply(tool_calls=[ToolCall("finish", {})], prompt_tokens=500, completion_tokens=3)]
    with ScriptedLLM(script) as server:
        proc, events = run_agent(workspace, server)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert (workspace / "solution.py").read_text() == GOOD

    first = server.requests[0]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "more shapes" in first["messages"][0]["content"]
    assert first["messages"][1]["content"] == PROMPT
    assert [t["function"]["name"] for t in first["tools"]] == ["run_kernel", "read_file", "finish"]

    failed = tool_messages(server.requests[1])[-1]
    assert "status: incorrect" in failed["content"] and "max abs error" in failed["content"]
    assert "exit status: 1" in failed["content"] and "key=hidden" in failed["content"]
    assert failed["tool_call_id"] == server.requests[1]["messages"][-2]["tool_calls"][0]["id"]
    passed = tool_messages(server.requests[2])[-1]
    assert "status: correct" in passed["content"] and "exit status: 0" in passed["content"]

    start = events[0]
    assert isinstance(start, StartEvent) and start.model == "scripted-1" and start.version
    assert start.base_url and start.base_url.startswith(server.url) and start.max_turns == 20
    assistants = [e for e in events if isinstance(e, MessageEvent) and e.role == "assistant"]
    assert [a.usage.input_tokens for a in assistants if a.usage] == [100, 300, 500]
    assert assistants[1].content == "fixing" and assistants[1].tool_calls[0].name == "run_kernel"
    result = result_of(events)
    assert (result.finished, result.reason, result.turns) == (True, "finish", 3)
    assert (result.input_tokens, result.output_tokens) == (900, 63)
    assert result.cache_read_tokens is None and result.wall_s > 0


def test_read_file_stays_inside_the_workspace(workspace: Path) -> None:
    reads = [ToolCall("read_file", {"path": p}) for p in ("reference.py", "../secret.txt", "/etc/passwd", "escape",
                                                          "missing.py", ".")]
    with ScriptedLLM([Reply(tool_calls=reads), Reply(tool_calls=[ToolCall("finish", {})])]) as server:
        proc, events = run_agent(workspace, server)
    assert proc.returncode == 0, proc.stderr
    inside, dotdot, absolute, link, missing, listing = (m["content"] for m in tool_messages(server.requests[1]))
    assert inside == "class Model: ...\n"
    assert dotdot.startswith("error:") and "'..'" in dotdot
    assert absolute.startswith("error:") and "absolute" in absolute and "root:" not in absolute
    assert link.startswith("error:") and "outside the workspace" in link and "outside\n" not in link
    assert missing.startswith("error:") and "no such file" in missing
    assert "PROMPT.md" in listing and "reference.py" in listing
    assert result_of(events).reason == "finish"


def test_read_file_caps_large_files(workspace: Path) -> None:
    (workspace / "big.txt").write_text("x" * (llm_tools.READ_LIMIT + 10))
    text = llm_tools.read_file(workspace, "big.txt")
    assert text.startswith("x" * llm_tools.READ_LIMIT) and "truncated" in text


def test_max_turns_ends_the_loop(workspace: Path) -> None:
    with ScriptedLLM(lambda body: Reply(tool_calls=[ToolCall("run_kernel", {"code": BAD})])) as server:
        proc, events = run_agent(workspace, server, "--max-turns", "3")
    assert proc.returncode == 0, proc.stderr
    assert len(server.requests) == 3
    result = result_of(events)
    assert (result.finished, result.reason, result.turns) == (False, "max_turns", 3)
    assert (result.input_tokens, result.output_tokens) == (300, 60)
    assert ADAPTER.completed(workspace.parent / "transcript.jsonl", proc.returncode)


def test_server_error_is_retried(workspace: Path) -> None:
    with ScriptedLLM([Reply(status=500), Reply(status=503),
                      Reply(tool_calls=[ToolCall("finish", {})], prompt_tokens=7, completion_tokens=2)]) as server:
        proc, events = run_agent(workspace, server)
    assert proc.returncode == 0, proc.stderr
    assert len(server.requests) == 3
    retries = [e for e in events if isinstance(e, ErrorEvent)]
    assert [(e.fatal, e.status) for e in retries] == [(False, 500), (False, 503)]
    result = result_of(events)
    assert (result.reason, result.turns, result.input_tokens, result.output_tokens) == ("finish", 1, 7, 2)


def test_retries_run_out(workspace: Path) -> None:
    with ScriptedLLM(lambda body: Reply(status=502)) as server:
        proc, events = run_agent(workspace, server, "--retries", "2")
    assert proc.returncode == 1
    assert len(server.requests) == 3
    assert result_of(events).reason == "error" and "gave up after 3 attempts" in proc.stderr


def test_unauthorized_is_fatal(workspace: Path) -> None:
    with ScriptedLLM([Reply(tool_calls=[ToolCall("finish", {})])], api_key="right") as server:
        proc, events = run_agent(workspace, server, key="wrong")
    assert proc.returncode == 1
    assert len(server.requests) == 1
    assert "Traceback" not in proc.stderr and "401" in proc.stderr
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].fatal and errors[0].status == 401
    result = result_of(events)
    assert (result.finished, result.reason, result.turns) == (False, "error", 0)
    assert not ADAPTER.completed(workspace.parent / "transcript.jsonl", proc.returncode)


def test_bad_tool_calls_become_error_results(workspace: Path) -> None:
    calls = [ToolCall("run_kernel", {"source": GOOD}), ToolCall("run_kernel", "not an object"),  # type: ignore[arg-type]
             ToolCall("shell", {"cmd": "ls"}), ToolCall("read_file", {"path": 3})]
    with ScriptedLLM([Reply(tool_calls=calls), Reply(tool_calls=[ToolCall("finish", {})])]) as server:
        proc, events = run_agent(workspace, server)
    assert proc.returncode == 0, proc.stderr
    missing, not_object, unknown, wrong_type = (m["content"] for m in tool_messages(server.requests[1]))
    assert missing == "error: run_kernel needs a string argument 'code'"
    assert not_object == "error: the arguments must be a JSON object"
    assert unknown.startswith("error: unknown tool 'shell'")
    assert wrong_type == "error: read_file needs a string argument 'path'"
    assert (workspace / "solution.py").read_text() == "# starter\n"
    assert result_of(events).reason == "finish"


def test_parse_arguments() -> None:
    assert llm_tools.parse_arguments('{"code": "x"}') == {"code": "x"}
    assert llm_tools.parse_arguments("") == {}
    bad = llm_tools.parse_arguments('{"code": "x"')
    assert isinstance(bad, str) and bad.startswith("error: the arguments are not valid JSON")


def test_nudged_once_then_stops(workspace: Path) -> None:
    with ScriptedLLM([Reply(content="I will think."), Reply(content="Still thinking.")]) as server:
        proc, events = run_agent(workspace, server)
    assert proc.returncode == 0, proc.stderr
    nudge = server.requests[1]["messages"][-1]
    assert nudge["role"] == "user" and "finish" in nudge["content"]
    result = result_of(events)
    assert (result.finished, result.reason, result.turns) == (False, "no_tool_call", 2)
    assert not ADAPTER.completed(workspace.parent / "transcript.jsonl", proc.returncode)


def test_nudge_then_tool_call_continues(workspace: Path) -> None:
    script = [Reply(content="plan"), Reply(tool_calls=[ToolCall("run_kernel", {"code": GOOD})]), Reply(content="hm"),
              Reply(tool_calls=[ToolCall("finish", {})])]
    with ScriptedLLM(script) as server:
        proc, events = run_agent(workspace, server)
    assert proc.returncode == 0, proc.stderr
    assert result_of(events).reason == "finish" and len(server.requests) == 4


def test_bench_timeout_is_reported(workspace: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("run_kernel", {"code": "# SLEEP"})]),
              Reply(tool_calls=[ToolCall("finish", {})])]
    with ScriptedLLM(script) as server:
        proc, _ = run_agent(workspace, server, "--tool-timeout", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert "timed out after 0.5 s" in tool_messages(server.requests[1])[-1]["content"]


def test_sigterm_still_writes_a_result(workspace: Path) -> None:
    script = [Reply(tool_calls=[ToolCall("run_kernel", {"code": "# SLEEP"})], prompt_tokens=11, completion_tokens=3)]
    with ScriptedLLM(script) as server:
        env = {**os.environ, "OPENAI_API_KEY": "k"}
        proc = subprocess.Popen([sys.executable, "-m", "rooftop.agents.llm", "--model", "m", "--base-url", server.url],
                                cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # let ./bench start
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    result = ResultEvent.model_validate_json(out.splitlines()[-1])
    assert (result.reason, result.turns, result.input_tokens) == ("error", 1, 11)


def test_truncate_keeps_head_and_tail() -> None:
    text = "HEAD" + "m" * 40_000 + "TAIL"
    cut = llm_tools.truncate(text)
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and "left out" in cut and len(cut) < 17_000
    assert llm_tools.truncate("short") == "short"


def test_usage_reads_cached_and_reasoning_tokens() -> None:
    from openai.types.chat import ChatCompletion

    response = ChatCompletion.model_validate({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 3}}})
    assert llm.usage_of(response) == Usage(input_tokens=10, output_tokens=5, cache_read_tokens=4,
                                           reasoning_tokens=3)
    total = Usage(input_tokens=1, output_tokens=1) + llm.usage_of(response)
    assert (total.input_tokens, total.cache_read_tokens, total.reasoning_tokens) == (11, 4, 3)


@pytest.mark.parametrize("argv", [[], ["--model", "m", "--max-turns", "0"], ["--model", "m", "--retries", "x"],
                                  ["--model", "m", "--bogus"]])
def test_bad_usage_exits_2(argv: list[str], tmp_path: Path) -> None:
    (tmp_path / "PROMPT.md").write_text(PROMPT)
    proc = subprocess.run([sys.executable, "-m", "rooftop.agents.llm", *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_prompt_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "rooftop.agents.llm", "--model", "m"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "PROMPT.md" in proc.stderr and proc.stdout == ""


def test_read_transcript_drops_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    start = StartEvent(version="1", model="m", tools=["finish"], max_turns=2).model_dump_json()
    call = MessageEvent(role="assistant", usage=Usage(input_tokens=5, output_tokens=2)).model_dump_json()
    path.write_text(f"{start}\n{call}\n{call}\n{call[:20]}")
    events = read_transcript(path)
    assert [e.type for e in events] == ["start", "message", "message"]
    path.write_text(f"{start}\nnot json\n{call}\n")
    with pytest.raises(ValueError, match=":2:"):
        read_transcript(path)


def test_adapter_launch_and_version(tmp_path: Path) -> None:
    assert adapter("llm") is ADAPTER
    assert ADAPTER.key_env == ("OPENAI_API_KEY", "OPENAI_BASE_URL") and ADAPTER.supports_max_turns
    launch = ADAPTER.launch(executable="/py", prompt=PROMPT, workspace=tmp_path, home=tmp_path, model="qwen",
                            max_turns=7, args=["--temperature", "0.2"])
    assert launch.argv == ["/py", "-m", "rooftop.agents.llm", "--model", "qwen", "--max-turns", "7",
                           "--temperature", "0.2"]
    assert launch.stdin is None
    plain = ADAPTER.launch(executable="/py", prompt=PROMPT, workspace=tmp_path, home=tmp_path, model="qwen",
                           max_turns=None, args=[])
    assert plain.argv == ["/py", "-m", "rooftop.agents.llm", "--model", "qwen"]
    from rooftop.errors import UserError
    with pytest.raises(UserError):
        ADAPTER.launch(executable="/py", prompt=PROMPT, workspace=tmp_path, home=tmp_path, model=None,
                       max_turns=None, args=[])
    version = subprocess.run(ADAPTER.version_argv(sys.executable), capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("rooftop ")


def test_adapter_usage_from_result_and_from_a_killed_run(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    start = StartEvent(version="1", model="m", tools=["finish"], max_turns=2).model_dump_json()
    call = MessageEvent(role="assistant", usage=Usage(input_tokens=5, output_tokens=2,
                                                      cache_read_tokens=1)).model_dump_json()
    tool = MessageEvent(role="tool", content="ok", tool_call_id="c").model_dump_json()
    result = ResultEvent(finished=True, reason="finish", turns=2, input_tokens=10, output_tokens=4,
                         cache_read_tokens=2, wall_s=1.0).model_dump_json()
    path.write_text("\n".join([start, call, tool, call, result]) + "\n")
    usage = ADAPTER.usage(path, [])
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.turns) == (10, 4, 2, 2)
    assert usage.reasoning_tokens is None and ADAPTER.completed(path, 0)

    path.write_text("\n".join([start, call, tool, call, result[:30]]))  # killed while writing the result
    usage = ADAPTER.usage(path, [])
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.turns) == (10, 4, 2, 2)
    assert not ADAPTER.completed(path, None)

    assert ADAPTER.usage(tmp_path / "absent.jsonl", []).input_tokens is None
    assert not ADAPTER.completed(tmp_path / "absent.jsonl", 0)


def test_transcript_lines_are_json_events(workspace: Path) -> None:
    with ScriptedLLM([Reply(tool_calls=[ToolCall("finish", {})])]) as server:
        proc, _ = run_agent(workspace, server)
    lines = proc.stdout.splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["start", "message", "message", "message", "message",
                                                            "result"]
