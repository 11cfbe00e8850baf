"""The agent CLI adapters: their command lines, and what they read back from transcripts.

Transcripts here are small synthetic ones written by the tests (real captures informed their
shapes); the fake CLIs under tests/fakes/agents are run directly in a workspace-like folder, with
the command line their adapter builds, and their output read back by the adapter.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import rooftop.agents.adapters as adapters
from rooftop.agents.adapters import Adapter, Launch, adapter, adapter_names
from rooftop.agents.adapters.command import program
from rooftop.errors import UserError
from rooftop.transcripts.usage import Usage

FAKES = Path(__file__).parent / "fakes" / "agents"
NAMES = ("claude", "codex", "opencode", "kimi", "cursor", "gemini", "command")
PROMPT = "# Make it fast\n\nWrite `ModelNew` in solution.py.\n"


def write(path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    """A JSON-lines file, optionally ending in a cut-off line as a killed agent leaves one."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def launch(name: str, tmp_path: Path, *, model: str | None = "m", max_turns: int | None = None,
           args: list[str] | None = None) -> Launch:
    return adapter(name).launch(executable=f"/bin/{name}", prompt=PROMPT, workspace=tmp_path / "ws",
                                home=tmp_path / "home", model=model, max_turns=max_turns, args=args or [])


# --- registry ---------------------------------------------------------------------------------------------

def test_registry_lists_every_cli_adapter():
    assert set(NAMES) <= set(adapter_names())
    for name in NAMES:
        found = adapter(name)
        assert isinstance(found, Adapter) and found.name == name
        assert type(found).__module__ == f"rooftop.agents.adapters.{name}"


def test_unknown_adapter_is_a_user_error():
    with pytest.raises(UserError, match="unknown agent adapter 'nope'"):
        adapter("nope")


def test_a_new_adapter_is_one_module_that_registers_itself(tmp_path, monkeypatch):
    """A module of the package that adds its adapter to ADAPTERS is found on the first lookup; a
    helper module beside it registers nothing and breaks nothing."""
    from rooftop.plugins import Registry

    (tmp_path / "probe_cli.py").write_text(
        "from rooftop.agents.adapters import ADAPTERS\nfrom rooftop.agents.adapters.base import Adapter\n\n\n"
        "class ProbeCli(Adapter):\n    name = 'probe-cli'\n\n\nADAPTERS.add(ProbeCli.name, ProbeCli())\n")
    (tmp_path / "helpers_only.py").write_text("VALUE = 1\n")
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(tmp_path)])
    monkeypatch.setattr(adapters, "ADAPTERS", Registry("agent adapter", adapters.__name__))
    try:
        assert "probe-cli" in adapter_names() and adapter("probe-cli").name == "probe-cli"
        with pytest.raises(UserError, match="unknown agent adapter 'nope' .*probe-cli"):
            adapter("nope")
    finally:
        for module in ("probe_cli", "helpers_only"):
            sys.modules.pop(f"rooftop.agents.adapters.{module}", None)


def test_max_turns_support_is_declared():
    assert {n for n in NAMES if adapter(n).supports_max_turns} == {"claude", "kimi", "command"}
    assert adapter("claude").key_env[0] == "ANTHROPIC_API_KEY" and "OPENAI_API_KEY" in adapter("codex").key_env


# --- command lines ----------------------------------------------------------------------------------------

def test_claude_launch(tmp_path):
    got = launch("claude", tmp_path, model="sonnet", max_turns=7, args=["--add-dir", "/data"])
    assert got.argv == ["/bin/claude", "-p", "--output-format", "stream-json", "--verbose",
                        "--dangerously-skip-permissions", "--model", "sonnet", "--max-turns", "7",
                        "--add-dir", "/data", "--", PROMPT]
    assert got.stdin is None and got.env == {"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    bare = launch("claude", tmp_path, model=None)
    assert "--model" not in bare.argv and "--max-turns" not in bare.argv and bare.argv[-2:] == ["--", PROMPT]


def test_codex_launch_makes_its_home(tmp_path):
    got = launch("codex", tmp_path, model="gpt-5", max_turns=3, args=["-c", "model_reasoning_effort=high"])
    assert got.argv == ["/bin/codex", "exec", "--json", "--skip-git-repo-check",
                        "--dangerously-bypass-approvals-and-sandbox", "-C", str(tmp_path / "ws"),
                        "-c", "analytics.enabled=false", "-c", "features.plugins=false", "-m", "gpt-5",
                        "-c", "model_reasoning_effort=high", "--", PROMPT]
    assert got.env == {"CODEX_HOME": str(tmp_path / "home" / ".codex")}
    assert (tmp_path / "home" / ".codex").is_dir()


def test_opencode_launch(tmp_path):
    got = launch("opencode", tmp_path, model="anthropic/claude-sonnet-4-5", args=["--variant", "high"])
    assert got.argv == ["/bin/opencode", "run", "--format", "json", "--auto", "-m", "anthropic/claude-sonnet-4-5",
                        "--variant", "high", "--", PROMPT]
    with pytest.raises(UserError, match="provider/model"):
        launch("opencode", tmp_path, model="sonnet")


def test_kimi_launch_sends_the_prompt_on_stdin(tmp_path):
    got = launch("kimi", tmp_path, model="kimi-k2", max_turns=50, args=["--thinking"])
    assert got.argv == ["/bin/kimi", "--print", "--output-format", "stream-json", "-w", str(tmp_path / "ws"),
                        "-m", "kimi-k2", "--max-steps-per-turn", "50", "--thinking"]
    assert got.stdin == PROMPT and PROMPT not in got.argv


def test_cursor_launch(tmp_path):
    got = launch("cursor", tmp_path, model="sonnet-4", args=["--approve-mcps"])
    assert got.argv == ["/bin/cursor", "-p", "--output-format", "stream-json", "--force", "--trust",
                        "--workspace", str(tmp_path / "ws"), "--model", "sonnet-4", "--approve-mcps", PROMPT]


def test_gemini_launch_keeps_the_prompt_in_one_argument(tmp_path):
    got = launch("gemini", tmp_path, model="gemini-2.5-pro", max_turns=9)
    assert got.argv == ["/bin/gemini", f"--prompt={PROMPT}", "--output-format", "stream-json", "--yolo",
                        "--skip-trust", "-m", "gemini-2.5-pro"]


def test_command_launch_fills_placeholders(tmp_path):
    template = ["my-agent", "--task={prompt_file}", "--cwd", "{workspace}", "--model", "{model}", "--turns",
                "{max_turns}", "{prompt}", '{"literal": {model}}']
    got = launch("command", tmp_path, model="m1", max_turns=5, args=template)
    ws = tmp_path / "ws"
    assert got.argv == ["/bin/command", f"--task={ws / 'PROMPT.md'}", "--cwd", str(ws), "--model", "m1", "--turns",
                        "5", PROMPT, '{"literal": m1}']
    assert got.stdin == PROMPT
    unset = launch("command", tmp_path, model=None, args=["my-agent", "{model}", "{max_turns}"])
    assert unset.argv == ["/bin/command", "", ""]
    assert program(["my-agent", "x"]) == "my-agent"


def test_command_does_not_substitute_inside_the_prompt(tmp_path):
    got = adapter("command").launch(executable="a", prompt="keep {workspace} and {model}", workspace=tmp_path,
                                    home=tmp_path, model="m", max_turns=None, args=["a", "{prompt}"])
    assert got.argv == ["a", "keep {workspace} and {model}"]


@pytest.mark.parametrize("args", [[], [""], ["  "]])
def test_command_needs_args(tmp_path, args):
    with pytest.raises(UserError, match="^args: "):
        launch("command", tmp_path, args=args)
    with pytest.raises(UserError, match="^args: "):
        program(args)


def test_session_files_are_found_under_the_private_home(tmp_path):
    home = tmp_path / "home"
    assert adapter("claude").extra_transcripts(home) == adapter("codex").extra_transcripts(home) == []
    main = home / ".claude" / "projects" / "-ws" / "s1.jsonl"
    sub = home / ".claude" / "projects" / "-ws" / "s1" / "subagents" / "agent-a1.jsonl"
    rollout = home / ".codex" / "sessions" / "2026" / "01" / "02" / "rollout-2026-01-02T03-04-05-t1.jsonl"
    wire = home / ".kimi" / "sessions" / "h" / "s" / "wire.jsonl"
    for path in (main, sub, rollout, wire, rollout.with_name("history.jsonl")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    assert adapter("claude").extra_transcripts(home) == sorted([main, sub])
    assert adapter("codex").extra_transcripts(home) == [rollout]
    assert adapter("kimi").extra_transcripts(home) == [wire]


# --- transcripts: claude ----------------------------------------------------------------------------------

def _assistant(ident: str, usage: dict[str, int], model: str = "claude-x") -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": ident, "model": model, "content": [{"type": "text", "text": "."}],
                                             "usage": usage}}


CLAUDE_CALL = {"input_tokens": 2, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 400,
               "output_tokens": 7}


def test_claude_usage_from_the_result_line(tmp_path):
    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 3, "total_cost_usd": 0.25,
              "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000,
                        "output_tokens": 50}}
    path = write(tmp_path / "t.jsonl", {"type": "system", "subtype": "init"}, _assistant("a", CLAUDE_CALL), result)
    claude = adapter("claude")
    assert claude.usage(path, []) == Usage(input_tokens=1110, output_tokens=50, cache_read_tokens=1000,
                                           cache_write_tokens=100, cost_usd=0.25, turns=3)
    assert claude.completed(path, 0) and claude.completed(path, None)
    failed = write(tmp_path / "f.jsonl", {**result, "is_error": True, "result": "Not logged in"})
    assert not claude.completed(failed, 0)


def test_claude_killed_sums_each_message_once(tmp_path):
    path = write(tmp_path / "t.jsonl", {"type": "system", "subtype": "init"},
                 _assistant("msg_1", CLAUDE_CALL), _assistant("msg_1", CLAUDE_CALL),  # one line per content block
                 {"type": "user", "message": {"content": [{"type": "tool_result", "content": "ok"}]}},
                 _assistant("msg_2", CLAUDE_CALL), _assistant("err", {"input_tokens": 0}, model="<synthetic>"),
                 tail='not json at all\n{"type": "assistant", "message": {"id": "msg_3", "usage": {"input_tok')
    claude = adapter("claude")
    assert claude.usage(path, []) == Usage(input_tokens=864, output_tokens=14, cache_read_tokens=800,
                                           cache_write_tokens=60, turns=2)
    assert not claude.completed(path, None)


def test_claude_killed_takes_each_calls_final_usage_from_its_session_files(tmp_path):
    """Claude Code 2.1.332's stream repeats each call's usage as the call began (1 output token);
    its session file has the final figures, and a call the stream never printed."""
    started, final = {**CLAUDE_CALL, "output_tokens": 1}, {**CLAUDE_CALL, "output_tokens": 50}
    stream = write(tmp_path / "t.jsonl", {"type": "system", "subtype": "init"},
                   _assistant("msg_1", started), _assistant("msg_2", started))
    native = tmp_path / "home" / ".claude" / "projects" / "p" / "s.jsonl"
    native.parent.mkdir(parents=True)
    write(native, {"type": "queue-operation", "sessionId": "s"},
          {**_assistant("msg_1", final), "sessionId": "s"}, {**_assistant("msg_2", final), "sessionId": "s"},
          {**_assistant("msg_3", final), "sessionId": "s"})
    claude = adapter("claude")
    assert claude.extra_transcripts(tmp_path / "home") == [native]
    assert claude.usage(stream, [native]) == Usage(input_tokens=1296, output_tokens=150, cache_read_tokens=1200,
                                                   cache_write_tokens=90, turns=3)
    assert claude.usage(stream, []).output_tokens == 2  # the stream alone


def test_no_transcript_means_no_usage(tmp_path):
    missing = tmp_path / "missing.jsonl"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for name in NAMES:
        for path in (missing, empty):
            assert adapter(name).usage(path, []).model_dump(exclude={"turns"}) == Usage().model_dump(exclude={"turns"})
            if name != "command":
                assert not adapter(name).completed(path, 0)


# --- transcripts: codex -----------------------------------------------------------------------------------

def _turn(input_tokens: int, cached: int, output: int) -> dict[str, Any]:
    return {"type": "turn.completed", "usage": {"input_tokens": input_tokens, "cached_input_tokens": cached,
                                                "output_tokens": output}}


def test_codex_usage_sums_turns(tmp_path):
    path = write(tmp_path / "t.jsonl", {"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
                 {"type": "error", "message": "Reconnecting... 1/5"}, _turn(100, 60, 10), {"type": "turn.started"},
                 _turn(200, 150, 20), tail='{"type":"item.comp')
    codex = adapter("codex")
    assert codex.usage(path, []) == Usage(input_tokens=300, cache_read_tokens=210, output_tokens=30)
    assert codex.completed(path, 0)


@pytest.mark.parametrize("after", [[{"type": "turn.started"}, {"type": "turn.failed", "error": {"message": "x"}}],
                                   [{"type": "error", "message": "stream closed"}],
                                   [{"type": "turn.started"}]])
def test_codex_failure_after_a_turn_is_not_completion(tmp_path, after):
    path = write(tmp_path / "t.jsonl", {"type": "turn.started"}, _turn(1, 0, 1), *after)
    assert not adapter("codex").completed(path, 1)


def _token_count(total: dict[str, int] | None) -> dict[str, Any]:
    info = None if total is None else {"total_token_usage": total, "last_token_usage": total}
    return {"timestamp": "2026-01-01T00:00:00Z", "type": "event_msg", "payload": {"type": "token_count", "info": info}}


def test_codex_rollout_totals_are_cumulative(tmp_path):
    first = {"input_tokens": 1000, "cached_input_tokens": 500, "output_tokens": 40, "reasoning_output_tokens": 8}
    second = {"input_tokens": 2500, "cached_input_tokens": 1800, "output_tokens": 90, "reasoning_output_tokens": 20}
    rollout = write(tmp_path / "rollout-2026-01-01T00-00-00-t.jsonl",
                    {"type": "session_meta", "payload": {"id": "t"}}, _token_count(None), _token_count(first),
                    _token_count(first), _token_count(second), _token_count(second), tail='{"timestamp":"20')
    other = write(tmp_path / "history.jsonl", _token_count({"input_tokens": 10**9}))
    stream = write(tmp_path / "t.jsonl", _turn(1, 1, 1))
    assert adapter("codex").usage(stream, [other, rollout]) == Usage(
        input_tokens=2500, cache_read_tokens=1800, output_tokens=90, reasoning_tokens=20, turns=2)
    assert adapter("codex").usage(stream, [other]) == Usage(input_tokens=1, cache_read_tokens=1, output_tokens=1)


# --- transcripts: opencode, kimi, cursor, gemini, command --------------------------------------------------

def _step(reason: str, inp: int, out: int, reasoning: int, read: int, cost: float) -> dict[str, Any]:
    tokens = {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": 0}}
    return {"type": "step_finish", "sessionID": "ses_1",
            "part": {"type": "step-finish", "reason": reason, "cost": cost, "tokens": tokens}}


def test_opencode_sums_steps(tmp_path):
    path = write(tmp_path / "t.jsonl", {"type": "step_start", "part": {"type": "step-start"}},
                 _step("tool-calls", 100, 10, 3, 0, 0.5), {"type": "tool_use", "part": {"type": "tool"}},
                 _step("stop", 20, 5, 1, 80, 0.25), tail='{"type":"text","tim')
    opencode = adapter("opencode")
    assert opencode.usage(path, []) == Usage(input_tokens=200, output_tokens=15, reasoning_tokens=4,
                                             cache_read_tokens=80, cache_write_tokens=0, cost_usd=0.75, turns=2)
    assert opencode.completed(path, 0) and not opencode.completed(path, 1) and not opencode.completed(path, None)
    cut = write(tmp_path / "c.jsonl", _step("tool-calls", 1, 1, 0, 0, 0.0))
    assert not opencode.completed(cut, 0)


def test_kimi_counts_steps_and_reads_tokens_from_its_wire_log(tmp_path):
    stream = write(tmp_path / "t.jsonl",
                   {"role": "assistant", "content": "look", "tool_calls": [{"type": "function", "id": "c1"}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "assistant", "content": "done"},
                   tail='{"role":"assis')

    def status(ident: str, other: int, read: int, out: int) -> dict[str, Any]:
        usage = {"input_other": other, "input_cache_read": read, "input_cache_creation": 0, "output": out}
        return {"timestamp": 1.0, "message": {"type": "StatusUpdate", "payload": {"token_usage": usage,
                                                                               "message_id": ident}}}

    wire = write(tmp_path / "wire.jsonl", {"type": "metadata", "protocol_version": "1.3"},
                 status("m1", 100, 0, 10), status("m1", 100, 0, 10), status("m2", 50, 100, 20))
    kimi = adapter("kimi")
    assert kimi.usage(stream, []) == Usage(turns=2)
    assert kimi.usage(stream, [wire]) == Usage(input_tokens=250, cache_read_tokens=100, cache_write_tokens=0,
                                               output_tokens=30, turns=2)
    assert kimi.completed(stream, 0) and not kimi.completed(stream, None)


def test_cursor_reads_its_result_line(tmp_path):
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": "s",
              "usage": {"inputTokens": 100, "outputTokens": 20, "cacheReadTokens": 300, "cacheWriteTokens": 5}}
    path = write(tmp_path / "t.jsonl", {"type": "system", "subtype": "init"},
                 {"type": "tool_call", "subtype": "started", "call_id": "c\n1"}, result)
    cursor = adapter("cursor")
    assert cursor.usage(path, []) == Usage(input_tokens=405, output_tokens=20, cache_read_tokens=300,
                                           cache_write_tokens=5)
    assert cursor.completed(path, 0)
    bare = write(tmp_path / "b.jsonl", {k: v for k, v in result.items() if k != "usage"})
    assert cursor.usage(bare, []) == Usage() and cursor.completed(bare, 0)
    cut = write(tmp_path / "c.jsonl", {"type": "assistant", "message": {}}, tail='{"type":"res')
    assert not cursor.completed(cut, 1)


def test_gemini_reads_its_result_stats(tmp_path):
    result = {"type": "result", "status": "success",
              "stats": {"total_tokens": 1300, "input_tokens": 1200, "output_tokens": 100, "cached": 800,
                        "input": 400, "duration_ms": 5, "tool_calls": 2}}
    path = write(tmp_path / "t.jsonl", {"type": "init", "session_id": "s", "model": "g"},
                 {"type": "message", "role": "assistant", "content": "hi", "delta": True}, result)
    gemini = adapter("gemini")
    assert gemini.usage(path, []) == Usage(input_tokens=1200, output_tokens=100, cache_read_tokens=800)
    assert gemini.completed(path, 0) and not gemini.completed(path, 53)
    failed = write(tmp_path / "f.jsonl", {**result, "status": "error"})
    assert not gemini.completed(failed, 0)


def test_command_usage_from_a_last_usage_line(tmp_path):
    command = adapter("command")
    reported = write(tmp_path / "u.jsonl", {"step": 1},
                     {"usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5, "turns": 1, "other": 3}},
                     tail="{cut off")
    assert command.usage(reported, []) == Usage(input_tokens=10, output_tokens=2, cost_usd=0.5, turns=1)
    later = write(tmp_path / "l.jsonl", {"usage": {"input_tokens": 10}}, {"step": 2})
    bad = write(tmp_path / "b.jsonl", {"usage": {"input_tokens": "many"}})
    plain = tmp_path / "p.txt"
    plain.write_text("hello\n")
    assert command.usage(later, []) == command.usage(bad, []) == command.usage(plain, []) == Usage()
    assert command.completed(plain, 0) and not command.completed(plain, 1) and not command.completed(plain, None)


def test_usage_the_agent_prints_is_checked_and_says_where_it_came_from(tmp_path):
    """`{"input_tokens": -5, "output_tokens": 1e9, "cost_usd": -100}` on a command agent's last line
    was stored as it was printed."""
    forged = write(tmp_path / "f.jsonl", {"usage": {"input_tokens": -5, "output_tokens": 1e9, "cost_usd": -100,
                                                    "turns": 4, "cache_read_tokens": 7}})
    raw = adapter("command").usage(forged, [])
    checked = raw.checked(adapter("command").usage_origin)
    assert (checked.input_tokens, checked.output_tokens, checked.cost_usd) == (None, None, None)
    assert (checked.turns, checked.cache_read_tokens, checked.origin) == (4, 7, "reported")
    assert checked.rejected == ["input_tokens=-5", "output_tokens=1000000000", "cost_usd=-100.0"]
    honest = Usage(input_tokens=12_000_000, output_tokens=80_000, cost_usd=31.5, turns=90).checked("counted")
    assert honest.rejected == [] and honest.origin == "counted" and honest.input_tokens == 12_000_000
    assert Usage().checked("reported") == Usage()  # nothing reported: no origin either
    assert Usage(cost_usd=float("nan")).checked("reported").rejected == ["cost_usd=nan"]
    assert {adapter(n).usage_origin for n in ("claude", "cursor", "gemini", "command")} == {"reported"}
    assert {adapter(n).usage_origin for n in ("codex", "opencode", "kimi", "llm")} == {"counted"}


# --- the fake CLIs, run directly -------------------------------------------------------------------------

STARTER = "class ModelNew:\n    def forward(self, x):\n        return x\n"


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "PROMPT.md").write_text(PROMPT)
    (ws / "reference.py").write_text(STARTER.replace("ModelNew", "Model"))
    (ws / "solution.py").write_text(STARTER)
    for tool in ("check", "bench"):
        (ws / tool).write_text(f"#!/bin/sh\necho '{tool}: all shapes ok'\nexit 0\n")
        (ws / tool).chmod(0o755)
    return ws


def _env(home: Path, launched: Launch, extra: dict[str, str]) -> dict[str, str]:
    # python3 from this interpreter's folder: the fakes need only the standard library
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")])
    return {"PATH": path, "HOME": str(home), **launched.env, **extra}


def run_fake(name: str, mode: str, workspace: Path, **extra: str) -> tuple[Path, int, Path]:
    """Start the fake CLI as the runner would: the adapter's argv, cwd the workspace, its own HOME."""
    home = workspace.parent / "home"
    home.mkdir(exist_ok=True)
    launched = adapter(name).launch(executable=str(FAKES / name), prompt=PROMPT, workspace=workspace, home=home,
                                    model=mode, max_turns=None, args=[])
    transcript = workspace.parent / f"{name}-{mode}.jsonl"
    with transcript.open("wb") as out:
        done = subprocess.run(launched.argv, cwd=workspace, env=_env(home, launched, extra), stdout=out,
                              stderr=subprocess.PIPE, input=(launched.stdin or "").encode(), timeout=120)
    assert done.returncode in (0, 3), done.stderr.decode()
    return transcript, done.returncode, home


@pytest.mark.parametrize(("name", "line"), [("claude", r"\d+\.\d+\.\d+ \(Claude Code\)\n"),
                                            ("codex", r"codex-cli \d+\.\d+\.\d+\n")])
def test_fake_version_line(name, line):
    done = subprocess.run(adapter(name).version_argv(str(FAKES / name)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and re.match(line, done.stdout)


def test_fake_claude_honest(workspace):
    transcript, code, _ = run_fake("claude", "honest", workspace)
    claude = adapter("claude")
    calls = 4  # edit, ./check, ./bench, final answer
    assert code == 0 and claude.completed(transcript, code)
    assert claude.usage(transcript, []) == Usage(input_tokens=calls * 1105, output_tokens=calls * 40,
                                                 cache_read_tokens=calls * 1000, cache_write_tokens=calls * 100,
                                                 cost_usd=0.004, turns=calls)
    assert (workspace / "solution.py").read_text().rstrip().endswith("# tuned")
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert records[0]["type"] == "system" and records[0]["subtype"] == "init"
    results = [block["content"] for r in records if r["type"] == "user" for block in r["message"]["content"]]
    assert "check: all shapes ok\n" in results and "bench: all shapes ok\n" in results
    ids = [r["message"]["id"] for r in records if r["type"] == "assistant"]
    assert len(ids) > len(set(ids)) == calls  # one line per content block, as the real CLI writes


def test_fake_codex_honest_with_its_rollout(workspace):
    transcript, code, home = run_fake("codex", "honest", workspace)
    codex = adapter("codex")
    rollouts = codex.extra_transcripts(home)
    assert code == 0 and codex.completed(transcript, code) and len(rollouts) == 1
    calls = 4
    assert codex.usage(transcript, []) == Usage(input_tokens=calls * 1000, cache_read_tokens=calls * 800,
                                                output_tokens=calls * 50)
    assert codex.usage(transcript, rollouts) == Usage(input_tokens=calls * 1000, cache_read_tokens=calls * 800,
                                                      output_tokens=calls * 50, reasoning_tokens=calls * 10,
                                                      turns=calls)
    assert (workspace / "solution.py").read_text().rstrip().endswith("# tuned")
    outputs = [json.loads(line)["item"].get("aggregated_output") for line in transcript.read_text().splitlines()
               if '"item.completed"' in line]
    assert "check: all shapes ok\n" in outputs and "bench: all shapes ok\n" in outputs


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_fake_wrong_breaks_the_output(workspace, name):
    transcript, code, _ = run_fake(name, "wrong", workspace)
    assert code == 0 and adapter(name).completed(transcript, code)
    scope: dict[str, Any] = {}
    exec((workspace / "solution.py").read_text(), scope)
    assert scope["ModelNew"]().forward(3) == 7


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_fake_probe_reports_what_it_could_reach(workspace, name, tmp_path):
    readable, writable = tmp_path / "readable.txt", tmp_path / "writable"
    readable.write_text("x")
    writable.mkdir()
    locked = tmp_path / "locked.txt"
    locked.write_text("x")
    locked.chmod(0o444)
    writes = [writable, tmp_path / "absent", readable] + ([locked] if os.geteuid() != 0 else [])
    paths = {"FAKE_PROBE_PATHS": os.pathsep.join([str(readable), str(tmp_path / "absent"), str(writable)]),
             "FAKE_WRITE_PATHS": os.pathsep.join(map(str, writes))}
    transcript, code, home = run_fake(name, "probe", workspace, **paths)
    assert code == 0 and adapter(name).completed(transcript, code)
    probe = json.loads((workspace / "probe.json").read_text())
    assert probe == {str(readable): "ok", str(tmp_path / "absent"): "denied: ENOENT", str(writable): "ok",
                     **({str(locked): "denied: EACCES"} if locked in writes else {})}
    # a written folder keeps the probe's file, so that a test can see on the host what got through
    assert [p.name for p in writable.iterdir()] == ["fake-probe-written"] and readable.read_text() == "x"
    env = json.loads((workspace / "env.json").read_text())
    assert env["HOME"] == str(home) and env["FAKE_PROBE_PATHS"] == paths["FAKE_PROBE_PATHS"]
    assert (workspace / "solution.py").read_text().rstrip().endswith("# tuned")


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_fake_crash_is_not_completed(workspace, name):
    transcript, code, home = run_fake(name, "crash", workspace)
    chosen = adapter(name)
    assert code == 3 and not chosen.completed(transcript, code)
    assert chosen.usage(transcript, chosen.extra_transcripts(home)).turns == 1


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_fake_orphan_leaves_a_detached_grandchild(workspace, name):
    token = f"fake-orphan-{name}-{os.getpid()}-{time.monotonic_ns()}"
    transcript, code, _ = run_fake(name, "orphan", workspace, FAKE_ORPHAN_TOKEN=token)
    try:
        assert code == 0 and adapter(name).completed(transcript, code)
        left = _processes_with(token)
        assert len(left) == 1 and os.getsid(left[0]) != os.getsid(0)
    finally:
        for pid in _processes_with(token):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("name", ["claude", "codex"])
@pytest.mark.parametrize("mode", ["sleep", "stubborn"])
def test_fake_hangs_until_killed(workspace, name, mode):
    home = workspace.parent / "home"
    home.mkdir()
    launched = adapter(name).launch(executable=str(FAKES / name), prompt=PROMPT, workspace=workspace, home=home,
                                    model=mode, max_turns=None, args=[])
    proc = subprocess.Popen(launched.argv, cwd=workspace, env=_env(home, launched, {}), stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["type"] in ("system", "thread.started")
        proc.send_signal(signal.SIGTERM)
        if mode == "stubborn":
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)
        else:
            assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
