"""Coding agents in sandboxed workspaces: what a workspace holds, what an agent can reach, its
budget, the grading on shapes it never saw, and sweeps (with fake agent CLIs that behave like
Claude Code and Codex, and rooftop's own agent against a scripted OpenAI-compatible server)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, ROOT

from rooftop.agents.gateway import Gateway
from rooftop.agents.record import AgentRun
from rooftop.agents.runner import AgentConfig, RunPlan, run_agent
from rooftop.agents.workspace import build_workspace, solution_files
from rooftop.integrity.sandbox import bwrap_path
from rooftop.problem.loader import load_problem
from rooftop.service.evaluator import Evaluator
from rooftop.service.queue import JobQueue
from rooftop.store.db import Store
from rooftop.vocabulary import DeviceChoice, Settings

FAKES = Path(__file__).parent / "fakes" / "agents"
GOOD = (FIXTURES / "solutions/good.py").read_text()
needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="needs bubblewrap (apt-get install bubblewrap)")

# three tiny problems with held-out shapes and no smoke shapes: on a CPU the agent sees the
# visible shapes and the grading runs the held-out ones too
HELD_OUT = {"scale": {"name": "odd", "params": {"B": 3, "N": 1001}, "split": "held_out"},
            "copy": {"name": "odd_length", "params": {"N": 1537}, "split": "held_out"},
            "linear": {"name": "odd_features", "params": {"B": 3, "IN": 33, "OUT": 17}, "split": "held_out"}}


@pytest.fixture(scope="module")
def deck(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("deck")
    for name, held in HELD_OUT.items():
        folder = root / name
        shutil.copytree(FIXTURES / "problems" / name, folder)
        spec = yaml.safe_load((folder / "problem.yaml").read_text())
        spec.pop("smoke", None)
        spec["shapes"] = [s for s in spec["shapes"] if s.get("split") != "held_out"]
        spec["shapes"].append({**held, "note": "the secret shape nobody was shown"})
        (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    return root


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator(tmp_path_factory.mktemp("agents") / "r.db", "cpu") as running:
        yield running


def _plan(model: str, problem: Path, *, adapter: str = "claude", timeout: float = 120, env: list[str] | None = None,
          args: list[str] | None = None) -> RunPlan:
    return RunPlan(agent=AgentConfig(adapter=adapter, executable=str(FAKES / adapter), timeout=timeout, env=env or [],
                                     args=args or []),
                   model=model, problem=str(problem))


def _run(plan: RunPlan, evaluator: Evaluator, tmp_path: Path, **kw) -> AgentRun:
    return run_agent(plan, evaluator=evaluator, settings=Settings(device=DeviceChoice.cpu), runs_dir=tmp_path / "runs",
                     db=evaluator.db, **kw)


# -- the workspace --------------------------------------------------------------------------
def test_a_workspace_holds_the_visible_shapes_only(deck, tmp_path):
    problem = load_problem(deck / "scale")
    root = build_workspace(problem, tmp_path / "ws", socket_path=tmp_path / "gw.sock", run_shapes="visible",
                           budget_s=600, max_turns=30)
    names = sorted(p.name for p in root.iterdir())
    assert names == ["PROMPT.md", "bench", "check", "reference.py", "shapes.yaml", "solution.py"]
    assert all(os.access(root / t, os.X_OK) for t in ("check", "bench"))
    text = "\n".join(p.read_text() for p in root.iterdir())
    assert "1001" not in text and "odd" not in text and "secret shape" not in text
    assert "N: 256" in (root / "shapes.yaml").read_text()
    prompt = (root / "PROMPT.md").read_text()
    assert "./check" in prompt and "./bench" in prompt and "10 minutes" in prompt and "30 turns" in prompt
    assert "class ModelNew" in (root / "solution.py").read_text()


def test_the_solution_is_read_without_following_links(tmp_path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    secret = tmp_path / "results.db"
    secret.write_text("secret")
    (ws / "solution.py").symlink_to(secret)
    assert solution_files(ws) == {}
    (ws / "solution.py").unlink()
    (ws / "solution.py").write_text(GOOD)
    (ws / "kernels" / "k.cu").write_text("// kernel")
    (ws / "kernels" / "leak.cu").symlink_to(secret)
    (ws / "notes.py").write_text("scratch, not graded")
    assert solution_files(ws) == {"solution.py": GOOD.encode(), "kernels/k.cu": b"// kernel"}


class _NoEvaluator:
    device = "cpu"

    def submit(self, *args, **kwargs):
        raise AssertionError("a refused request reached the evaluator")


@pytest.mark.parametrize("request_body, workspace, why", [
    ({"tool": "grade"}, {"solution.py": GOOD}, "tool"),
    ({"tool": "check", "files": {"solution.py": "eA=="}}, {"solution.py": GOOD}, "exactly the field 'tool'"),
    ({"tool": "check", "shapes": "all"}, {"solution.py": GOOD}, "exactly the field 'tool'"),
    ({"tool": "check"}, {}, "no solution.py"),
    ({"tool": "bench"}, {"solution.py": "x" * (5 << 20)}, "bytes"),
    ({"tool": "bench"}, {"solution.py": GOOD, "kernels/x.cu": "// " + "x" * (5 << 20)}, "bytes"),
])
def test_the_gateway_decides_what_is_evaluated(tmp_path, deck, request_body, workspace, why):
    ws = tmp_path / "ws"
    for name, text in workspace.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    ws.mkdir(exist_ok=True)
    gateway = Gateway(_NoEvaluator(), load_problem(deck / "scale"), Settings(), run_shapes="visible",  # type: ignore[arg-type]
                      label="t", log=tmp_path / "calls.jsonl", workspace=ws)
    answer = gateway.answer(json.dumps(request_body).encode())
    assert answer["exit"] == 2 and why in answer["text"]
    assert json.loads((tmp_path / "calls.jsonl").read_text())["error"]


class _Submitted(Exception):
    pass


class _Capture:
    device = "cpu"

    def __init__(self) -> None:
        self.sources: list = []

    def submit(self, problem, source, settings, label=None):
        self.sources.append(source)
        raise _Submitted


def test_a_check_evaluates_exactly_what_the_grade_will(tmp_path, deck):
    """The check client followed a `kernels` link that the grader skipped: check said `rejected`
    while the grade said `correct` (and the reverse would fail an honest agent)."""
    from rooftop.agents.workspace import snapshot

    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "solution.py").write_text(GOOD)
    (ws / "kernels" / "k.cu").write_text("// kept")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "evil.cu").write_text("// not part of the solution")
    (ws / "kernels" / "linked").symlink_to(outside, target_is_directory=True)
    (ws / "kernels" / "leak.cu").symlink_to(outside / "evil.cu")
    capture = _Capture()
    gateway = Gateway(capture, load_problem(deck / "scale"), Settings(), run_shapes="visible",  # type: ignore[arg-type]
                      label="t", log=tmp_path / "calls.jsonl", workspace=ws)
    for tool in ("check", "bench"):
        with pytest.raises(_Submitted):
            gateway.answer(json.dumps({"tool": tool}).encode())
    graded = snapshot(solution_files(ws))
    assert [s.files for s in capture.sources] == [graded.files, graded.files]
    assert sorted(graded.files) == ["kernels/k.cu", "solution.py"]


# -- runs: the sandbox, the budget, what is left behind ---------------------------------------
@needs_bwrap
def test_the_agent_sandbox_writes_only_its_workspace_and_home_and_has_no_gpu(tmp_path):
    from rooftop.agents.sandbox import agent_sandbox

    ws, home, gw = tmp_path / "ws", tmp_path / "home", tmp_path / "gw"
    plan = agent_sandbox("bwrap", workspace=ws, home=home, gateway=gw, readable=[ROOT / "tests" / "fakes"])
    args = plan.prefix
    writable = [args[i + 1] for i, a in enumerate(args) if a in ("--bind", "--dev-bind")]
    assert writable == [str(ws), str(home), str(gw)]
    # no network at all unless a run's egress proxy is given (the version probe's sandbox)
    assert "--share-net" not in args and "--unshare-all" in args and "--die-with-parent" in args
    assert not any("nvidia" in a or "/dev/dri" in a for a in args)
    readable = [args[i + 1] for i, a in enumerate(args) if a == "--ro-bind"]
    assert str(ROOT) not in readable and str(ROOT / "problems") not in readable
    assert str(ROOT / "tests" / "fakes") in readable


class _Served:
    """A loopback HTTP server answering every GET with its name: a model endpoint, or any service of
    the host's (a tokenless `rooftop serve`, another run's server)."""

    def __init__(self, name: str) -> None:
        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                body = name.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.target = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@needs_bwrap
def test_the_agent_reaches_its_listed_endpoints_and_no_other_service_of_the_host(deck, evaluator, tmp_path,
                                                                                 monkeypatch):
    """A tokenless `rooftop serve` on loopback was usable from inside the agent sandbox, which shared
    the host's network: an agent created evaluations of every shape there."""
    model, service = _Served("model"), _Served("service")
    try:
        monkeypatch.setenv("FAKE_NET_TARGETS", f"{model.target},{service.target}")
        plan = _plan("net", deck / "scale", env=["FAKE_NET_TARGETS"])
        plan.agent.endpoints = [model.target]
        record = _run(plan, evaluator, tmp_path)
        assert record.sandbox == "bwrap" and record.state == "done", record.error
        seen = json.loads((Path(record.folder) / "workspace" / "net.json").read_text())
    finally:
        model.server.shutdown()
        service.server.shutdown()
    # its model, at the same address as outside (forwarded), and through the proxy
    assert seen[f"direct {model.target}"] == "HTTP/1.0 200 OK model", seen
    assert seen[f"proxy {model.target}"] == "HTTP/1.0 200 OK model", seen
    # the host's other service: not there, and refused by the proxy, which names it in the record
    assert seen[f"direct {service.target}"] == "denied: ECONNREFUSED", seen
    assert seen[f"proxy {service.target}"].startswith("proxy: HTTP/1.1 403"), seen
    assert seen["dns"].startswith("denied"), seen
    assert record.endpoints == [model.target] and record.egress_refused == [service.target]


def test_an_agent_s_endpoints_are_its_providers_and_the_urls_it_is_given(monkeypatch):
    from rooftop.agents.adapters import adapter

    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8123/v1")
    config = AgentConfig(adapter="claude", env=["ANTHROPIC_BASE_URL"])
    assert config.reachable(adapter("claude")) == ["127.0.0.1:8123", "api.anthropic.com:443"]
    listed = AgentConfig(adapter="llm", endpoints=["https://gpu-box.lan:8443/v1", "Example.org:80"],
                         args=["--base-url", "http://[::1]:9000"])
    assert listed.reachable(adapter("llm")) == ["[::1]:9000", "example.org:80", "gpu-box.lan:8443"]
    assert AgentConfig(adapter="codex", endpoints=["*"]).reachable(adapter("codex")) is None
    # a URL inside an argument (a config override) counts too
    override = AgentConfig(adapter="codex", args=["-c", 'model_providers.m.base_url="http://127.0.0.1:7000/v1"'])
    assert override.reachable(adapter("codex")) == ["127.0.0.1:7000", "api.openai.com:443", "chatgpt.com:443"]
    with pytest.raises(ValueError, match="not host:port"):
        AgentConfig(adapter="claude", endpoints=["api.anthropic.com"])


@needs_bwrap
@pytest.mark.slow
def test_the_agent_sees_neither_results_nor_held_out_data_nor_other_runs_nor_secrets(deck, evaluator, tmp_path,
                                                                                    monkeypatch):
    first = _run(_plan("honest", deck / "scale"), evaluator, tmp_path)
    assert first.state == "done" and first.graded and first.graded.status == "correct"
    reads = [evaluator.db, deck / "scale" / "problem.yaml", deck / "scale", ROOT / "problems", Path(first.folder),
             Path(first.folder) / "workspace" / "solution.py", ROOT / "README.md", Path.home() / ".ssh"]
    writes = [ROOT, ROOT / "src" / "rooftop", deck, Path(sys.prefix), Path(first.folder).parent]
    monkeypatch.setenv("FAKE_PROBE_PATHS", os.pathsep.join(map(str, reads)))
    monkeypatch.setenv("FAKE_WRITE_PATHS", os.pathsep.join(map(str, writes)))
    monkeypatch.setenv("MY_API_KEY", "sk-test-passed-1234")
    monkeypatch.setenv("OTHER_API_KEY", "sk-test-withheld-5678")
    monkeypatch.setenv("ROOFTOP_TOKEN", "server-token-9999")
    record = _run(_plan("probe", deck / "scale", env=["FAKE_PROBE_PATHS", "FAKE_WRITE_PATHS", "MY_API_KEY"],
                        args=["--append-system-prompt", "key sk-test-passed-1234"]), evaluator, tmp_path)
    assert record.sandbox == "bwrap" and record.state == "done", record.error
    workspace = Path(record.folder) / "workspace"
    probe = json.loads((workspace / "probe.json").read_text())
    assert set(probe) == {*map(str, reads), *map(str, writes)}
    assert all(probe[str(p)].startswith("denied") for p in reads), probe
    # a write "succeeds" only into the sandbox's own private /tmp (this test's folders lie under /tmp):
    # nothing it wrote may reach the host, and outside /tmp the write is refused outright
    assert not [p for p in writes if (p / "fake-probe-written").exists()]
    assert all(probe[str(p)].startswith("denied") for p in writes if not p.is_relative_to("/tmp")), probe
    env = json.loads((workspace / "env.json").read_text())
    assert env["MY_API_KEY"] == "sk-test-passed-1234"
    assert "OTHER_API_KEY" not in env and "ROOFTOP_TOKEN" not in env
    assert not any("withheld" in v or "server-token" in v for v in env.values())
    assert record.env_passed == ["FAKE_PROBE_PATHS", "FAKE_WRITE_PATHS", "MY_API_KEY"]
    assert "sk-test-passed-1234" not in json.dumps(record.command) and "key ***" in record.command
    assert "{prompt}" in record.command
    # its own run folder holds what it did; the workspace it left is the final state
    assert record.checks >= 1 and record.benches >= 1 and (Path(record.folder) / "calls.jsonl").is_file()
    assert not (Path(record.folder) / "home").exists()  # credentials copied for the CLI do not outlive the run


def test_files_left_in_the_agents_home_are_copied_only_as_regular_files_apart_from_the_records(
        deck, evaluator, tmp_path, monkeypatch):
    """A CLI left links in its session folder to the results database and a held-out problem.yaml,
    and forged transcript.jsonl and calls.jsonl there: the collection followed the links, and the
    forgeries replaced the run's own records (a check with speedup 50 that never happened)."""
    secret = tmp_path / "outside" / "results.jsonl"
    secret.parent.mkdir()
    secret.write_text('{"secret": "SECRET-RESULTS"}\n')
    monkeypatch.setenv("FAKE_SECRET_PATH", str(secret))
    record = _run(_plan("forger", deck / "scale", env=["FAKE_SECRET_PATH"]), evaluator, tmp_path)
    assert record.state == "done", record.error
    folder = Path(record.folder)
    copied = [p for p in folder.rglob("*") if p.is_file()]
    assert not [p for p in copied if b"SECRET-RESULTS" in p.read_bytes()]
    assert not [p for p in folder.rglob("*") if p.is_symlink()]
    assert '"forged"' not in (folder / "transcript.jsonl").read_text()  # the captured stdout stays
    assert "50.0" not in (folder / "calls.jsonl").read_text() and record.checks == 1  # the gateway's own
    kept = folder / "agent_files" / ".claude" / "projects" / "p"
    assert sorted(p.name for p in kept.iterdir()) == ["calls.jsonl", "transcript.jsonl"]  # apart, as left


LOOKER = """#!{python}
# a `command` agent that ignores its arguments: --version runs it whole, as it runs for the session
import json, os, subprocess, sys
from pathlib import Path
workspace = Path(os.environ["HOME"]).parent / "workspace"
seen = {{"key": "LOOKER_API_KEY" in os.environ, "solution": (workspace / "solution.py").exists(),
         "check": (workspace / "check").exists()}}
print(json.dumps(seen, sort_keys=True), flush=True)
if seen["check"]:
    subprocess.run([str(workspace / "check")], cwd=workspace, capture_output=True)
print(json.dumps({{"usage": {{"input_tokens": -5, "output_tokens": 1e9, "cost_usd": -100, "turns": 2}}}}))
"""


def test_the_version_probe_gets_no_workspace_no_gateway_and_no_key(deck, evaluator, tmp_path, monkeypatch):
    """The probe used to run the whole CLI beside the run's workspace, with the gateway and the API
    key, before the session and outside its budget, and a ./check it made counted as the agent's."""
    script = tmp_path / "looker"
    script.write_text(LOOKER.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("LOOKER_API_KEY", "sk-looker-1234")
    plan = RunPlan(agent=AgentConfig(adapter="command", args=[str(script)], env=["LOOKER_API_KEY"], timeout=120),
                   problem=str(deck / "scale"))
    record = _run(plan, evaluator, tmp_path)
    assert record.state == "done", record.error
    assert json.loads(record.cli_version or "null") == {"check": False, "key": False, "solution": False}
    assert json.loads((Path(record.folder) / "transcript.jsonl").read_text().splitlines()[0]) == {
        "check": True, "key": True, "solution": True}  # the session itself has them all
    assert record.checks == 1
    assert record.usage.rejected == ["input_tokens=-5", "output_tokens=1000000000", "cost_usd=-100.0"]
    assert (record.usage.input_tokens, record.usage.turns, record.usage.origin) == (None, 2, "reported")


@pytest.mark.slow
@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_the_budget_kills_the_agent_and_whatever_it_left_running(deck, evaluator, tmp_path, monkeypatch, sandbox):
    token = f"rooftop-orphan-{os.getpid()}-{sandbox}"
    monkeypatch.setenv("FAKE_ORPHAN_TOKEN", token)
    left = _run(_plan("orphan", deck / "copy", env=["FAKE_ORPHAN_TOKEN"]), evaluator, tmp_path,
                agent_sandbox_kind=sandbox)
    assert left.exit_code == 0 and left.completed and not left.timed_out
    assert not _processes_with(token), "a process the agent left behind outlived its run"

    started = time.monotonic()
    stubborn = _run(_plan("stubborn", deck / "copy", timeout=3), evaluator, tmp_path, agent_sandbox_kind=sandbox,
                    grace_s=1.0)
    assert stubborn.timed_out and not stubborn.completed and stubborn.exit_code is not None and stubborn.exit_code < 0
    assert 3 <= stubborn.wall_s < 3 + 1.0 + 10
    assert time.monotonic() - started < 60
    # the starter it never touched is still graded: a run that did nothing scores the reference
    assert stubborn.graded is not None and stubborn.graded.status == "correct"


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_a_crashed_or_wrong_agent_is_recorded_as_such(deck, evaluator, tmp_path):
    crashed = _run(_plan("crash", deck / "linear"), evaluator, tmp_path)
    assert crashed.exit_code == 3 and not crashed.completed
    wrong = _run(_plan("wrong", deck / "linear", adapter="codex"), evaluator, tmp_path)
    assert wrong.completed and wrong.graded and wrong.graded.status == "incorrect"
    assert wrong.visible and wrong.visible.status == "incorrect" and wrong.visible.shapes == "visible"
    assert (Path(wrong.folder) / "transcript.jsonl").stat().st_size > 0
    # codex's own session file, copied apart from the run's records
    assert any(p.name.startswith("rollout-") for p in (Path(wrong.folder) / "agent_files").rglob("*"))
    assert wrong.usage.input_tokens and wrong.usage.output_tokens


# -- sweeps ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_sweep_of_two_agents_three_problems_two_repeats_runs_and_resumes(deck, tmp_path):
    config = {
        "name": "fakes",
        "agents": [{"adapter": "claude", "name": "fake-claude", "executable": str(FAKES / "claude"),
                    "models": ["honest"], "timeout": 120},
                   {"adapter": "codex", "name": "fake-codex", "executable": str(FAKES / "codex"),
                    "models": ["wrong"], "timeout": 120}],
        "problems": [str(deck / n) for n in ("scale", "copy", "linear")],
        "repeats": 2, "concurrency": 2, "device": "cpu", "db": str(tmp_path / "r.db"), "out": str(tmp_path / "runs"),
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    runs = _sweep(path)
    assert len(runs) == 12 and all(r["state"] == "done" for r in runs), \
        [(r["id"], r["state"], r.get("error")) for r in runs if r["state"] != "done"]
    for r in runs:
        folder = Path(r["folder"])
        assert folder.parent == tmp_path / "runs"
        assert folder.name.endswith(f"_{r['agent']}_{r['model']}_{Path(r['problem']).name}_{r['repeat']}")
        assert (folder / "workspace" / "solution.py").is_file() and (folder / "transcript.jsonl").is_file()
        assert json.loads((folder / "run.json").read_text())["id"] == r["id"]
        visible, graded = r["visible"], r["graded"]
        assert visible["shapes"] == "visible" and graded["shapes"] == "all" and graded["held_out_shapes"] == 1
        expected = "correct" if r["agent"] == "fake-claude" else "incorrect"
        assert visible["status"] == graded["status"] == expected
        assert r["usage"]["output_tokens"] and r["cli_version"] and r["completed"]
    # what people read afterwards, over these very run folders: pages, an index, an audit note, a leaderboard
    db, honest = str(tmp_path / "r.db"), next(r for r in runs if r["agent"] == "fake-claude")
    assert _rooftop("view", "--index", str(tmp_path / "runs")).strip().endswith("index.html")
    assert all((Path(r["folder"]) / "view.html").is_file() for r in runs)
    _rooftop("annotate", honest["id"], "--verdict", "interesting", "--summary", "appends a comment",
             "--quote", "workspace/solution.py:1", "--db", db)
    board = json.loads(_rooftop("report", "--sweep", "fakes", "--db", db, "-o", str(tmp_path / "report"), "--json"))
    cells = {(row["agent"], problem): cell for row in board["rows"] for problem, cell in row["cells"].items()}
    assert len(cells) == 6 and all(c["runs"] == 2 for c in cells.values())
    assert {c["passed"] for (agent, _), c in cells.items() if agent == "fake-claude"} == {2}
    assert {c["passed"] for (agent, _), c in cells.items() if agent == "fake-codex"} == {0}
    assert all(c["held_out_runs"] == 2 for c in cells.values())
    assert any(c["marks"] for c in cells.values()) and (tmp_path / "report" / "leaderboard.html").is_file()

    store = Store(tmp_path / "r.db")
    try:
        rows = store.agent_runs.runs("fakes")
        assert len(rows) == 12 and {row.state for row in rows} == {"done"}
        queue = JobQueue(store)
        jobs = [queue.get(json.loads(row.record_json)["graded"]["job"]) for row in rows]
        verdicts = [store.evaluations.verdict(j.evaluation_id) for j in jobs if j and j.evaluation_id]
        assert len(verdicts) == 12
        assert all(v is not None and any(s.split == "held_out" for s in v.shapes) for v in verdicts)
        # a harness killed mid-run: that cell is run again, the rest is kept
        with store.transaction() as db:
            db.execute("UPDATE agent_runs SET state = 'running' WHERE id = ?", (rows[0].id,))
    finally:
        store.close()
    again = _sweep(path)
    assert len(again) == 12 and sum(r["id"] not in {x["id"] for x in runs} for r in again) == 1
    store = Store(tmp_path / "r.db")
    try:
        states = [row.state for row in store.agent_runs.runs("fakes")]
    finally:
        store.close()
    assert states.count("abandoned") == 1 and states.count("done") == 12


def _rooftop(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _sweep(path: Path) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "rooftop", "sweep", str(path), "--json"], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("body, message", [
    ({"problems": ["x"]}, "agents"),
    ({"agents": [{"adapter": "nope"}], "problems": ["x"]}, "unknown agent adapter 'nope'"),
    ({"agents": [{"adapter": "claude", "colour": 1}], "problems": ["x"]}, "agents.0.colour"),
    ({"agents": [{"adapter": "claude", "executable": "/no/such/cli"}], "problems": ["x"]}, "/no/such/cli"),
    ({"agents": [{"adapter": "claude"}], "problems": ["x"], "repeats": 0}, "repeats"),
    ({"agents": [{"adapter": "claude", "endpoints": ["api.anthropic.com"]}], "problems": ["x"]},
     "agents.0.endpoints: 'api.anthropic.com' is not host:port"),
])
def test_a_bad_sweep_config_is_one_line_and_exit_2(tmp_path, body, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(body))
    done = subprocess.run([sys.executable, "-m", "rooftop", "sweep", str(path), "--db", str(tmp_path / "r.db")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


# -- rooftop's own agent, end to end through the harness --------------------------------------
@pytest.mark.slow
def test_rooftop_agent_llm_runs_in_its_workspace_against_an_openai_compatible_server(deck, tmp_path, monkeypatch):
    from fakes.openai_server import Reply, ScriptedLLM, ToolCall

    script = [Reply(tool_calls=[ToolCall("read_file", {"path": "shapes.yaml"})], prompt_tokens=300,
                    completion_tokens=7),
              Reply(tool_calls=[ToolCall("run_kernel", {"code": GOOD})], prompt_tokens=400, completion_tokens=90),
              Reply(tool_calls=[ToolCall("finish", {})], prompt_tokens=500, completion_tokens=3)]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-key")
    with ScriptedLLM(script, api_key="sk-scripted-key") as llm:
        done = subprocess.run([sys.executable, "-m", "rooftop", "agent", "llm", str(deck / "scale"), "--model",
                               "scripted-1", "--base-url", llm.url, "--device", "cpu", "--timeout", "300",
                               "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "runs"), "--json"],
                              capture_output=True, text=True, timeout=600)
        requests = llm.requests
    assert done.returncode == 0, done.stderr[-3000:]
    [run] = json.loads(done.stdout)
    assert run["adapter"] == "llm" and run["completed"] and run["exit_code"] == 0
    assert run["usage"]["input_tokens"] == 1200 and run["usage"]["output_tokens"] == 100
    assert run["graded"]["status"] == "correct" and run["graded"]["held_out_shapes"] == 1
    assert run["benches"] == 1
    # what the model was shown: the visible shapes, the bench's report, never the held-out shape
    shown = json.dumps(requests)
    assert "N: 256" in shown and "status: correct" in shown and "1001" not in shown
    transcript = Path(run["folder"]) / "transcript.jsonl"
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert events[0]["type"] == "start" and events[-1]["type"] == "result" and events[-1]["reason"] == "finish"
    assert (Path(run["folder"]) / "workspace" / "solution.py").read_text() == GOOD


def test_a_harness_failure_loses_that_run_only_and_says_where_to_look(deck, tmp_path, monkeypatch):
    import rooftop.agents.runner as runner

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(runner, "build_workspace", broken)
    db = tmp_path / "r.db"
    record = run_agent(_plan("honest", deck / "scale"), evaluator=_NoEvaluator(), settings=Settings(),  # type: ignore[arg-type]
                       runs_dir=tmp_path / "runs", db=db)
    assert record.state == "failed" and "disk on fire" in (record.error or "")
    assert "RuntimeError" in (Path(record.folder) / "harness_error.log").read_text()
    store = Store(db)
    try:
        [row] = store.agent_runs.runs()
    finally:
        store.close()
    assert row.id == record.id and row.state == "failed"


def test_agent_list_names_every_adapter_and_whether_its_cli_is_here():
    done = subprocess.run([sys.executable, "-m", "rooftop", "agent", "list", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {r["adapter"]: r for r in json.loads(done.stdout)}
    assert set(rows) == {"claude", "codex", "opencode", "kimi", "cursor", "gemini", "llm", "command"}
    assert rows["llm"]["found"] and rows["claude"]["key_env"]
