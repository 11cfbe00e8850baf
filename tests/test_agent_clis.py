"""Real agent CLIs, as shipped on npm (Claude Code, Codex, opencode), each driving a whole agent run
against a scripted model on loopback that speaks its provider's API (fakes/model_apis.py).

The model reads solution.py, writes a correct one, runs ./check and stops with a final answer; the
run must then be graded correct on every shape, held-out one included, its ./check in calls.jsonl,
its usage recorded, and its page written by `rooftop view` with the CLI's transcript read as that
CLI's format. The CLIs are installed, pinned, by `make agent-clis` into .cache/agent-clis (or
$ROOFTOP_AGENT_CLIS); where npm is missing or the install failed, the tests skip saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, ROOT

from rooftop.agents.runner import AgentConfig, RunPlan, run_agent
from rooftop.integrity.sandbox import bwrap_path
from rooftop.service.evaluator import Evaluator
from rooftop.transcripts.detect import load
from rooftop.vocabulary import DeviceChoice, Settings

CLIS = Path(os.environ.get("ROOFTOP_AGENT_CLIS") or ROOT / ".cache" / "agent-clis")
KEY = "sk-scripted-0123456789"
# not the starter (the reference renamed): the grade must be of what the model wrote
SOLUTION = '''import torch.nn as nn


class ModelNew(nn.Module):
    """Written by the scripted model."""

    def forward(self, x):
        return x.detach().clone()
'''
FINAL = "Done: ./check says correct."


@dataclass
class Cli:
    adapter: str
    package: str
    model: str
    api: str  # the provider API the CLI speaks (model_apis' name for it)
    formats: tuple[str, ...]  # what the run folder's transcript may be read as
    env: dict[str, str] = field(default_factory=dict)  # {name: value}; "{url}" / "{root}": the server's
    args: list[str] = field(default_factory=list)
    refused: tuple[str, ...] = ()  # what else it may try to reach, which the sandbox's network refuses


CASES = {
    "claude": Cli("claude", "@anthropic-ai/claude-code", "claude-sonnet-4-5", "anthropic", ("claude",),
                  env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "{root}"}),
    # a model Codex knows offers its apply_patch tool; the provider is a custom one, by -c overrides
    "codex": Cli("codex", "@openai/codex", "gpt-5.5", "responses", ("codex_rollout", "codex_exec"),
                 env={"SCRIPTED_API_KEY": KEY},
                 args=["-c", 'model_provider="scripted"', "-c", 'model_providers.scripted.name="scripted"',
                       "-c", 'model_providers.scripted.base_url="{url}"',
                       "-c", 'model_providers.scripted.env_key="SCRIPTED_API_KEY"',
                       "-c", 'model_providers.scripted.wire_api="responses"']),
    "opencode": Cli("opencode", "opencode-ai", "scripted/scripted-1", "chat", ("opencode",),
                    env={"SCRIPTED_API_KEY": KEY, "OPENCODE_DISABLE_MODELS_FETCH": "1",
                         "OPENCODE_CONFIG_CONTENT": json.dumps({
                             "$schema": "https://opencode.ai/config.json",
                             "provider": {"scripted": {
                                 "npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                                 "options": {"baseURL": "{url}", "apiKey": "{env:SCRIPTED_API_KEY}"},
                                 "models": {"scripted-1": {"name": "Scripted 1", "tool_call": True}}}}})},
                    refused=("registry.npmjs.org:443",)),  # its background `npm install @opencode-ai/plugin`
}


def installed(adapter: str) -> tuple[Path, str]:
    """The CLI's executable and its pinned version; skips where it is not installed, saying why."""
    program = CLIS / "node_modules" / ".bin" / adapter
    status = CLIS / "status"
    why = status.read_text().strip() if status.is_file() else f"not installed (make agent-clis, or {CLIS})"
    if not (program.is_file() and os.access(program, os.X_OK)):
        pytest.skip(f"agent CLI {adapter}: {why if why != 'ok' else 'missing from ' + str(program)}")
    pins = json.loads((CLIS / "package.json").read_text()).get("dependencies", {})
    return program, str(pins.get(CASES[adapter].package, ""))


@pytest.fixture(scope="module")
def copy_problem(tmp_path_factory) -> Path:
    """The smallest fixture problem, with one held-out shape and no smoke shapes."""
    folder = tmp_path_factory.mktemp("deck") / "copy"
    shutil.copytree(FIXTURES / "problems" / "copy", folder)
    spec = yaml.safe_load((folder / "problem.yaml").read_text())
    spec.pop("smoke", None)
    spec["shapes"].append({"name": "odd_length", "params": {"N": 1537}, "split": "held_out"})
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    return folder


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator(tmp_path_factory.mktemp("agent-clis") / "r.db", "cpu") as running:
        yield running


def _fill(text: str, model) -> str:
    return text.replace("{url}", model.url).replace("{root}", model.root)


@pytest.mark.slow
@pytest.mark.parametrize("adapter", sorted(CASES))
def test_a_real_agent_cli_drives_a_whole_run_against_a_scripted_model(adapter, copy_problem, evaluator, tmp_path,
                                                                       monkeypatch):
    from fakes.model_apis import INPUT_TOKENS, OUTPUT_TOKENS, ScriptedModel, coding_script

    program, pinned = installed(adapter)
    case = CASES[adapter]
    sandbox = "bwrap" if bwrap_path() is not None else "none"
    with ScriptedModel(coding_script(SOLUTION), api_key=KEY) as model:
        for name, value in case.env.items():
            monkeypatch.setenv(name, _fill(value, model))
        agent = AgentConfig(adapter=adapter, executable=str(program), env=sorted(case.env),
                            args=[_fill(a, model) for a in case.args], mounts=[CLIS / "node_modules"],
                            endpoints=[f"127.0.0.1:{model.port}"], timeout=240)
        record = run_agent(RunPlan(agent=agent, model=case.model, problem=str(copy_problem)), evaluator=evaluator,
                           settings=Settings(device=DeviceChoice.cpu), runs_dir=tmp_path / "runs",
                           db=evaluator.db, agent_sandbox_kind=sandbox)
    folder = Path(record.folder)
    stderr = (folder / "stderr.log").read_text(errors="replace")[-3000:]
    assert record.state == "done", (record.error, stderr)
    assert record.sandbox == sandbox and record.exit_code == 0 and record.completed, stderr
    assert pinned and pinned in (record.cli_version or ""), record.cli_version
    # its model was all it reached: Claude Code and Codex, as their adapters start them, try nothing else
    assert set(record.egress_refused) <= set(case.refused), record.egress_refused

    # the model's solution, graded correct on every shape, the held-out one included
    assert (folder / "workspace" / "solution.py").read_text() == SOLUTION
    assert record.graded is not None and record.graded.status == "correct", record.graded
    assert record.graded.held_out_shapes == record.graded.held_out_correct == 1
    assert record.visible is not None and record.visible.status == "correct"

    # the one ./check it asked for, as the harness recorded it, and what the model was told of it
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert [(c["tool"], c["status"]) for c in calls] == [("check", "correct")] and record.checks == 1
    main = [seen for seen in model.calls(case.api) if seen.body.get("tools")]
    assert len(main) >= 4, [seen.path for seen in model.requests]
    assert "status: correct" in json.dumps(main[-1].body)
    assert all(seen.api is not None for seen in model.requests), [s.path for s in model.requests if s.api is None]

    # usage: every scripted reply costs the same, so the totals are multiples of it
    usage = record.usage
    assert usage.turns is not None and usage.turns >= 4, usage
    assert usage.input_tokens and usage.input_tokens % INPUT_TOKENS == 0, usage
    assert usage.output_tokens and usage.output_tokens % OUTPUT_TOKENS == 0, usage
    assert usage.input_tokens >= INPUT_TOKENS * usage.turns and not usage.rejected, usage

    # the page of the run, with the CLI's transcript read as what it is
    session = load(folder)
    assert session.format in case.formats, session.format
    assert session.final_text == FINAL or any(e.text == FINAL for e in session.events)
    called = [c for e in session.events for c in e.tool_calls]
    assert any("./check" in json.dumps(c.arguments) for c in called), called
    assert any(c.file_path and c.file_path.endswith("solution.py") for c in called), called
    done = subprocess.run([sys.executable, "-m", "rooftop", "view", str(folder)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    page = (folder / "view.html").read_text()
    assert session.format in page  # the format it was read as, in the page's header
    assert FINAL in page and "./check" in page


def test_the_scripted_model_speaks_each_api_and_follows_the_tools_it_is_offered():
    """The scripted model itself, through the OpenAI client and plain HTTP, where no CLI is needed:
    each API's stream reassembles into the call the script chose, in the argument shape of the
    tool as offered, the step follows the tool results present, and a request offering no tools
    (a title, a quota probe) gets plain text."""
    import httpx
    import openai
    from fakes.model_apis import SIDE_ANSWER, ScriptedModel, coding_script

    def schema(*names: str) -> dict:
        return {"type": "object", "properties": {name: {"type": "string"} for name in names}}

    system = "Working directory: /runs/x_1/workspace\nBe brief."
    with ScriptedModel(coding_script(SOLUTION), api_key=KEY) as model:
        client = openai.OpenAI(base_url=model.url, api_key=KEY)
        # Chat Completions, streamed, with opencode's tools: the first step reads the solution
        tools = [{"type": "function", "function": {"name": n, "parameters": p}}
                 for n, p in (("read", schema("filePath")), ("write", schema("filePath", "content")),
                              ("bash", schema("command", "description")))]
        chunks = list(client.chat.completions.create(
            model="m", stream=True, stream_options={"include_usage": True}, tools=tools,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": "go"}]))
        calls = [c.function for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or []]
        assert calls[0].name == "read"
        assert json.loads("".join(c.arguments or "" for c in calls)) == {"filePath": "/runs/x_1/workspace/solution.py"}
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 50
        # after two tool results: ./check through bash, with the description opencode requires
        done = client.chat.completions.create(model="m", tools=tools, messages=[
            {"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "a", "content": "read"},
            {"role": "tool", "tool_call_id": "b", "content": "written"}])
        call = done.choices[0].message.tool_calls[0]
        assert call.function.name == "bash" and json.loads(call.function.arguments)["command"] == "./check"

        # Responses, streamed, with Codex's tools: apply_patch is a custom (free-form) tool
        codex = [{"type": "function", "name": "exec_command", "parameters": schema("cmd", "workdir")},
                 {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}]
        with client.responses.stream(model="m", tools=codex, input=[
                {"type": "message", "role": "user", "content": "go"},
                {"type": "function_call_output", "call_id": "c1", "output": "the old file"}]) as stream:
            final = stream.get_final_response()
        patch = next(item for item in final.output if item.type == "custom_tool_call")
        assert patch.name == "apply_patch" and "*** Add File: solution.py" in patch.input
        assert "+    def forward(self, x):" in patch.input
        assert final.usage is not None and final.usage.input_tokens == 1000

        # Anthropic Messages, streamed, with Claude Code's tools: the check has run, so the answer is final
        body = {"model": "claude-x", "stream": True, "max_tokens": 100, "system": [{"type": "text", "text": system}],
                "tools": [{"name": n, "input_schema": schema(*keys)} for n, keys in
                          (("Read", ("file_path",)), ("Write", ("file_path", "content")), ("Bash", ("command",)))],
                "messages": [{"role": "user", "content": "go"}, {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": text}
                    for i, text in enumerate(["old", "written", "status: correct\nreward: 0"])]}]}
        with httpx.Client() as http:
            answer = http.post(f"{model.root}/v1/messages", json=body, headers={"x-api-key": KEY})
            denied = http.post(f"{model.root}/v1/messages", json=body, headers={"x-api-key": "wrong"})
            quota = {"model": "haiku", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}
            side = http.post(f"{model.root}/v1/messages", headers={"x-api-key": KEY}, json=quota)
        events = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]
        assert [e["type"] for e in events] == ["message_start", "content_block_start", "content_block_delta",
                                               "content_block_delta", "content_block_stop", "message_delta",
                                               "message_stop"]
        said = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
        assert said == FINAL and events[-2]["delta"]["stop_reason"] == "end_turn"
        assert denied.status_code == 401
        assert side.json()["content"] == [{"type": "text", "text": SIDE_ANSWER}]
    assert [seen.api for seen in model.requests] == ["chat", "chat", "responses", "anthropic", "anthropic",
                                                     "anthropic"]
