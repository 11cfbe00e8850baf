"""`rooftop search`: a scripted model over real HTTP, a real evaluation service on the CPU."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import sys
import threading

import httpx
import openai
import pytest
import yaml
from conftest import FIXTURES
from fakes.openai_server import Reply, ScriptedLLM
from typer.testing import CliRunner

from rooftop.agents.search import extract_code, search, search_sync
from rooftop.agents.search_records import Node, SearchConfig, SearchSummary, code_hash, select_parent
from rooftop.errors import UserError
from rooftop.problem.registry import resolve
from rooftop.service.evaluator import Evaluator
from rooftop.service.queue import JobQueue
from rooftop.store.db import Store
from rooftop.vocabulary import Settings

pytestmark = pytest.mark.slow

GOOD = (FIXTURES / "solutions/good.py").read_text()
# the same kernel, laid out and commented differently: a duplicate
GOOD_AGAIN = "# the same, once more\n" + GOOD.replace("    def forward(self, x):", "\n    def forward(self, x):  # y")
FASTER = GOOD.replace("return x * self.alpha", "return self.alpha * x")
BROKEN = GOOD.replace("return x * self.alpha", "raise RuntimeError('kernel exploded on purpose')")
WRONG = GOOD.replace("return x * self.alpha", "return x + self.alpha")


def block(code: str, words: str = "Here it is.") -> Reply:
    return Reply(content=f"{words}\n```python\n{code}```\n", prompt_tokens=50, completion_tokens=10)


def copy_problem(tmp_path, name: str, title: str | None = None) -> str:
    """`scale` without its smoke shapes, so that a CPU search runs its visible shape and grades the
    held-out one too."""
    folder = tmp_path / name
    shutil.copytree(FIXTURES / "problems/scale", folder)
    spec = yaml.safe_load((folder / "problem.yaml").read_text())
    spec.pop("smoke")
    spec["shapes"][1]["note"] = "the secret odd shape"
    if title:
        spec["title"] = title
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    return str(folder)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator(tmp_path_factory.mktemp("search") / "r.db", "cpu") as running:
        yield running


def config(**changes) -> SearchConfig:
    return SearchConfig(model="scripted-1", backoff=0.01, settings=Settings(timeout=60), **changes)


def nodes_of(folder) -> list[Node]:
    return [Node.model_validate_json(line) for line in (folder / "nodes.jsonl").read_text().splitlines()]


def text_of(request: dict) -> str:
    return "\n".join(m["content"] or "" for m in request["messages"])


def test_replies_are_fixed_deduplicated_archived_and_the_best_is_graded(evaluator, tmp_path):
    problem = resolve(copy_problem(tmp_path, "scale_search"))
    replies = [Reply(content="overloaded", status=503),  # a transient error: retried, not a query of its own
               block(BROKEN),  # draft: fails at run time ...
               block(GOOD),  # ... its fix is correct
               block(GOOD_AGAIN),  # improve: the same kernel again, not evaluated
               block(FASTER),  # improve: correct, a new kernel
               block(WRONG),  # improve: wrong output
               Reply(content="I would rather not.")]  # its fix has no code; the budget ends here
    with ScriptedLLM(replies) as llm:
        client = openai.AsyncOpenAI(base_url=llm.url, api_key="k", max_retries=0)
        summary = search_sync([problem], evaluator, client, config(budget=6, branches=1, max_fix_attempts=2),
                              tmp_path / "out")
    assert len(llm.requests) == 7 and summary.usage.retries == 1 and summary.usage.requests == 7
    fix_request = text_of(llm.requests[2])
    assert "kernel exploded on purpose" in fix_request and "runtime_error" in fix_request
    seen = "".join(map(text_of, llm.requests))
    assert "secret" not in seen and "1001" not in seen and "held" not in seen  # nothing of the held-out shape
    assert "max_tokens" not in llm.requests[0] and llm.requests[0]["temperature"] == 0.8

    (result,) = summary.problems
    nodes = nodes_of(tmp_path / "out" / result.folder)
    assert [(n.kind, n.status) for n in nodes] == [
        ("draft", "runtime_error"), ("fix", "correct"), ("improve", "correct"), ("improve", "correct"),
        ("improve", "incorrect"), ("fix", "no_code")]
    assert [n.query for n in nodes] == [1, 2, 3, 4, 5, 6] and result.queries == 6 <= result.budget
    assert nodes[1].fixes == 1 and nodes[5].fixes == 5 and nodes[0].parent is None and nodes[1].parent is None
    assert nodes[2].duplicate_of == 2 and nodes[2].job == nodes[1].job and nodes[2].eval_s == 0.0
    archived = {n.id for n in nodes if n.status == "correct" and n.duplicate_of is None}
    assert archived == {2, 4}
    assert all(n.parent is None or n.parent in archived for n in nodes)
    assert all(n.parent in archived for n in nodes if n.kind == "improve")
    for n in nodes:
        if n.code_hash:
            assert (tmp_path / "out" / result.folder / "code" / f"{n.code_hash}.py").is_file()

    queue = JobQueue(Store(evaluator.db))
    jobs = [j for j in queue.jobs() if j.problem == problem.name]
    visible = [j for j in jobs if j.settings.shapes == "visible"]
    assert len(visible) == 4  # broken, good, faster, wrong: the duplicate was not submitted
    (graded,) = [j for j in jobs if j.settings.shapes == "all"]
    verdict = queue.store.evaluations.verdict(graded.evaluation_id)
    assert {r.split for r in verdict.shapes} == {"visible", "held_out"}
    queue.store.close()

    assert (result.nodes, result.correct, result.duplicates) == (6, 2, 1)
    assert result.best in archived and result.graded is not None and result.graded.job == graded.id
    assert result.graded.shapes == "all" and result.graded.status == verdict.status.value == "correct"
    best = next(n for n in nodes if n.id == result.best)
    assert result.best_reward == max(n.reward for n in nodes if n.id in archived) == best.reward
    assert (tmp_path / "out" / result.folder / "best.py").read_text() == (GOOD if best.id == 2 else FASTER)
    assert summary.usage.prompt_tokens == 5 * 50 + 100 and summary.usage.completion_tokens == 5 * 10 + 20
    written = SearchSummary.model_validate_json((tmp_path / "out" / "summary.json").read_text())
    assert written == summary


def test_a_slow_problem_does_not_hold_a_fast_one_back(evaluator, tmp_path):
    fast = resolve(copy_problem(tmp_path, "fast", title="Fast scaled copy"))
    slow = resolve(copy_problem(tmp_path, "slow", title="Slow scaled copy"))
    lock, count = threading.Lock(), {"fast": 0}

    def script(request: dict) -> Reply:
        if "Slow scaled copy" in text_of(request):
            return block(GOOD)
        with lock:
            count["fast"] += 1
            n = count["fast"]
        return block(GOOD + f"\nSCALE = {min(n, 2)}\n")  # two drafts, then their duplicates

    slow_calls = []

    async def slow_model(request: httpx.Request) -> None:
        if b"Slow scaled copy" in request.content:
            slow_calls.append(1)
            if len(slow_calls) <= 2:  # each line's first query
                await asyncio.sleep(8.0)

    async def run() -> SearchSummary:
        http = httpx.AsyncClient(event_hooks={"request": [slow_model]})
        client = openai.AsyncOpenAI(base_url=llm.url, api_key="k", max_retries=0, http_client=http)
        return await search([slow, fast], evaluator, client, config(budget=4, branches=2, seed=3), tmp_path / "out")

    with ScriptedLLM(script) as llm:
        summary = asyncio.run(run())
    by_name = {p.problem: p for p in summary.problems}
    quick, late = by_name[fast.name], by_name[slow.name]
    assert quick.queries == quick.nodes == 4 and late.queries == 4
    fast_nodes, slow_nodes = nodes_of(tmp_path / "out" / quick.folder), nodes_of(tmp_path / "out" / late.folder)
    # the fast problem spent its whole budget, two rounds per line, before the slow one had one reply
    assert max(n.finished_s for n in fast_nodes) < min(n.finished_s for n in slow_nodes)
    assert quick.finished_s < late.finished_s
    assert sum(n.kind == "improve" for n in fast_nodes) >= 2
    assert late.duplicates == 3 and late.correct == 1  # the same reply four times: evaluated once


def test_parent_selection_is_seeded_elite_or_least_explored():
    archive = [Node(id=i, problem="p", parent=None, branch=0, kind="draft", query=i, status="correct",
                    reward=float(i), started_s=0, finished_s=0) for i in range(1, 7)]
    picks = [select_parent(archive, {}, random.Random(7), 0.5, 2) for _ in range(3)]
    again = [select_parent(archive, {}, random.Random(7), 0.5, 2) for _ in range(3)]
    assert picks == again
    rng = random.Random(0)
    assert {select_parent(archive, {}, rng, 1.0, 2).id for _ in range(50)} == {6, 5}
    children = {1: 3, 2: 1, 3: 0, 4: 2}
    assert {select_parent(archive, children, rng, 0.0, 2).id for _ in range(20)} == {3}
    assert select_parent([], {}, rng, 0.5, 2) is None


def test_code_is_taken_from_the_last_block_and_named_by_its_syntax():
    reply = "first\n```python\nx = 1\n```\nthen\n```python\ny = 2  # two\n```\n"
    assert extract_code(reply) == "y = 2  # two\n"
    assert extract_code("no code here") is None and extract_code("```\nx = 1\n```") is None
    assert code_hash(GOOD) == code_hash(GOOD_AGAIN) != code_hash(FASTER)
    assert code_hash("def (:\n  x") == code_hash("def (:\n    x  \n\n")


def test_search_refuses_a_used_folder_and_an_unknown_reward(evaluator, tmp_path):
    problem = resolve(copy_problem(tmp_path, "p"))
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")
    with pytest.raises(UserError, match="--out"):
        search_sync([problem], evaluator, client, config(), tmp_path / "used")
    with pytest.raises(UserError, match="reward"):
        search_sync([problem], evaluator, client, config(reward="nope"), tmp_path / "new")


def test_a_refused_key_stops_the_search_at_once(evaluator, tmp_path):
    problem = resolve(copy_problem(tmp_path, "locked"))
    with ScriptedLLM([block(GOOD)] * 4, api_key="right") as llm:
        client = openai.AsyncOpenAI(base_url=llm.url, api_key="wrong", max_retries=0)
        with pytest.raises(UserError, match="refused the API key"):
            search_sync([problem], evaluator, client, config(budget=4, branches=2), tmp_path / "out")
    assert len(llm.requests) == 2  # one per line, no retries, nothing evaluated
    assert not (tmp_path / "out" / "summary.json").exists()


def test_the_command_searches_and_prints_json(tmp_path, monkeypatch):
    from rooftop.cli.main import app

    problem = copy_problem(tmp_path, "cli_scale")
    monkeypatch.setenv("SCRIPTED_KEY", "k")
    with ScriptedLLM([block(WRONG), block(FASTER)]) as llm:
        result = CliRunner().invoke(app, [
            "search", problem, "--model", "scripted-1", "--base-url", llm.url, "--api-key-env", "SCRIPTED_KEY",
            "--budget", "2", "--branches", "1", "--fix-attempts", "1", "--max-tokens", "4000", "--device", "cpu",
            "--sandbox", "none",
            "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 0, result.output
    assert [r["max_tokens"] for r in llm.requests] == [4000, 4000]
    doc = json.loads(result.stdout)
    (entry,) = doc["problems"]
    assert entry["queries"] == 2 and entry["correct"] == 1 and entry["graded"]["status"] == "correct"
    assert doc == json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (tmp_path / "run" / entry["folder"] / "best.py").read_text() == FASTER


@pytest.mark.parametrize("args,needle", [(["--budget", "0"], "--budget"), (["--elite", "2"], "--elite")])
def test_bad_options_are_one_line_errors(tmp_path, args, needle):
    proc = subprocess.run([sys.executable, "-m", "rooftop", "search", str(FIXTURES / "problems/scale"),
                           "--model", "m", *args, "--db", str(tmp_path / "r.db")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
