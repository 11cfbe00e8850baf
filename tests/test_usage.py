"""Token usage has one model, `rooftop.transcripts.usage.Usage`, and each agent's usage is counted
once, by its transcript parser: the adapters read it from there. Documents written before the
model was shared (run.json, the store's record_json, rooftop's own transcript, a search's
summary.json) still load, and are written in the same shape."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rooftop.agents.adapters import adapter
from rooftop.agents.record import AgentRun
from rooftop.agents.transcript import MessageEvent, ResultEvent, read_transcript
from rooftop.transcripts.detect import load
from rooftop.transcripts.events import Event, Session
from rooftop.transcripts.parsers import _anthropic, claude, parser
from rooftop.transcripts.usage import Usage

SRC = Path(__file__).parents[1] / "src" / "rooftop"
FIXTURES = Path(os.environ.get("ROOFTOP_TRANSCRIPT_FIXTURES")
                or Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "transcripts")
CLAUDE_STREAMS = sorted((FIXTURES / "claude").glob("*.jsonl")) if (FIXTURES / "claude").is_dir() else []


def write(path: Path, *records: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --- one model --------------------------------------------------------------------------------------------

def test_there_is_one_usage_class():
    """No module of the package defines a class named like a usage but the one in transcripts/usage.py."""
    found = sorted(f"{path.relative_to(SRC)}:{node.name}" for path in SRC.rglob("*.py")
                   for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)
                   and node.name.lower().endswith("usage"))
    assert found == ["transcripts/usage.py:Usage"]


def test_every_usage_field_is_that_class():
    from rooftop.agents.search_records import Queries

    for model, name in ((Event, "usage"), (Session, "usage"), (AgentRun, "usage"), (MessageEvent, "usage"),
                        (Queries, "tokens")):
        assert Usage in (model.model_fields[name].annotation, *getattr(model.model_fields[name].annotation,
                                                                        "__args__", ())), (model, name)


def test_usage_adds_figure_by_figure_keeping_none_where_nothing_was_reported():
    total = Usage(input_tokens=10, cost_usd=0.5) + Usage(input_tokens=5, output_tokens=2, turns=1)
    assert total == Usage(input_tokens=15, output_tokens=2, cost_usd=0.5, turns=1)
    assert total.cache_read_tokens is None and (Usage() + Usage()) == Usage()


# --- counted once: the adapter reads the parser's figures --------------------------------------------------

def _assistant(ident: str, output: int) -> dict[str, Any]:
    usage = {"input_tokens": 2, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 400,
             "output_tokens": output}
    return {"type": "assistant", "message": {"id": ident, "model": "claude-x", "usage": usage,
                                             "content": [{"type": "text", "text": "."}]}}


@pytest.mark.skipif(not CLAUDE_STREAMS, reason=f"no Claude Code transcripts under {FIXTURES}")
@pytest.mark.parametrize("stream", CLAUDE_STREAMS, ids=[p.name for p in CLAUDE_STREAMS])
def test_claude_adapter_usage_is_the_parsers_on_real_transcripts(stream):
    session = load(stream)
    assert session.usage.reported
    run = adapter("claude").usage(stream, [])
    assert run == session.usage.model_copy(update={"cost_usd": session.cost_usd, "turns": session.reported_turns})


def test_claude_adapter_usage_follows_the_parser(tmp_path, monkeypatch):
    """Were the adapter to count Claude's usage itself, changing how the parser reads a call's or a
    result line's usage would leave the adapter's figures where they were."""
    killed = write(tmp_path / "killed.jsonl", {"type": "system", "subtype": "init"}, _assistant("m1", 7),
                   _assistant("m1", 7), _assistant("m2", 9))
    result = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "total_cost_usd": 0.1,
              "modelUsage": {"claude-x": {"inputTokens": 4, "outputTokens": 16, "cacheReadInputTokens": 800,
                                          "cacheCreationInputTokens": 60}}}
    done = write(tmp_path / "done.jsonl", {"type": "system", "subtype": "init"}, _assistant("m1", 7), result)
    claude_adapter = adapter("claude")
    assert claude_adapter.usage(killed, []) == Usage(input_tokens=864, output_tokens=16, cache_read_tokens=800,
                                                     cache_write_tokens=60, turns=2)
    assert claude_adapter.usage(done, []) == Usage(input_tokens=864, output_tokens=16, cache_read_tokens=800,
                                                   cache_write_tokens=60, cost_usd=0.1, turns=2)

    monkeypatch.setattr(_anthropic, "tokens", lambda usage: Usage(input_tokens=1, output_tokens=1000))
    monkeypatch.setattr(claude, "model_usage", lambda result: Usage(input_tokens=3, output_tokens=3))
    assert claude_adapter.usage(killed, []) == parser("claude").read(killed).usage.model_copy(update={"turns": 2})
    assert claude_adapter.usage(killed, []) == Usage(input_tokens=2, output_tokens=2000, turns=2)
    assert claude_adapter.usage(done, []) == Usage(input_tokens=3, output_tokens=3, cost_usd=0.1, turns=2)


def test_claude_session_files_give_a_killed_calls_final_figures_once(tmp_path):
    stream = write(tmp_path / "t.jsonl", _assistant("m1", 1), _assistant("m2", 1))
    native = write(tmp_path / "home" / "s.jsonl", {**_assistant("m1", 50), "sessionId": "s"},
                   {**_assistant("m2", 50), "sessionId": "s"}, {**_assistant("m2", 50), "sessionId": "s"})
    assert claude.run_usage(stream, [native]) == Usage(input_tokens=864, output_tokens=100, cache_read_tokens=800,
                                                       cache_write_tokens=60, turns=2)


# --- documents written before: the same shape in, the same shape out ---------------------------------------

OLD_USAGE = {"input_tokens": 1110, "output_tokens": 50, "cache_read_tokens": 1000, "cache_write_tokens": 100,
             "reasoning_tokens": None, "cost_usd": 0.25, "turns": 3, "origin": "reported",
             "rejected": ["cost_usd=-1.0"]}


def test_an_old_run_record_loads_and_is_written_the_same():
    """run.json and the store's `agent_runs.record_json` hold an AgentRun, usage included."""
    old = {"id": "r1", "agent": "a", "adapter": "claude", "problem": "p", "started_at": "2026-01-01T00:00:00+00:00",
           "usage": OLD_USAGE}
    run = AgentRun.model_validate_json(json.dumps(old))
    assert run.usage == Usage(**OLD_USAGE)
    assert json.loads(run.model_dump_json())["usage"] == OLD_USAGE
    assert list(json.loads(run.model_dump_json())["usage"]) == list(OLD_USAGE)


def test_an_old_rooftop_transcript_loads_and_its_lines_keep_their_shape(tmp_path):
    tokens = {"input_tokens": 5, "output_tokens": 2, "cache_read_tokens": 1, "reasoning_tokens": None}
    path = write(tmp_path / "transcript.jsonl",
                 {"type": "message", "role": "assistant", "content": "hi", "reasoning": None, "tool_calls": [],
                  "tool_call_id": None, "usage": tokens, "time": "2026-01-01T00:00:00.000+00:00"},
                 {"type": "result", "finished": True, "reason": "finish", "turns": 1, "input_tokens": 5,
                  "output_tokens": 2, "cache_read_tokens": 1, "reasoning_tokens": None, "wall_s": 1.0,
                  "time": "2026-01-01T00:00:01.000+00:00"})
    message, result = read_transcript(path)
    assert isinstance(message, MessageEvent) and isinstance(result, ResultEvent)
    assert message.usage == Usage(input_tokens=5, output_tokens=2, cache_read_tokens=1)
    assert json.loads(message.model_dump_json())["usage"] == tokens
    assert adapter("llm").usage(path, []) == Usage(input_tokens=5, output_tokens=2, cache_read_tokens=1, turns=1)


def test_an_old_search_summary_loads_and_is_written_the_same():
    from rooftop.agents.search_records import ProblemSummary, Queries, SearchSummary

    queries = {"requests": 7, "retries": 1, "failed_queries": 0, "prompt_tokens": 350, "completion_tokens": 70}
    problem = {"problem": "p", "folder": "p", "budget": 5, "queries": 5, "nodes": 5, "correct": 1, "duplicates": 0,
               "run_shapes": "visible", "usage": queries}
    old = {"started_at": "2026-01-01T00:00:00+00:00", "seconds": 1.0, "device": "cpu", "endpoint": "http://x",
           "config": {"model": "m"}, "problems": [problem], "usage": queries}
    summary = SearchSummary.model_validate_json(json.dumps(old))
    assert (summary.usage.prompt_tokens, summary.usage.completion_tokens, summary.usage.requests) == (350, 70, 7)
    assert summary.usage.tokens == Usage(input_tokens=350, output_tokens=70)
    written = json.loads(summary.model_dump_json())
    assert written["usage"] == queries and written["problems"][0]["usage"] == queries
    assert list(written["usage"]) == list(queries)
    assert ProblemSummary.model_validate(problem).usage == summary.usage
    assert Queries().model_dump() == {**dict.fromkeys(queries, 0)}
