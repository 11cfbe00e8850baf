"""The bubblewrap sandbox: what a candidate cannot see, reach or write (CI installs bwrap)."""

import os
import sqlite3

import pytest
from conftest import FIXTURES, run

from rooftop.integrity.sandbox import bwrap_path, scrubbed_env

needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def test_secrets_are_scrubbed_from_the_environment():
    env = scrubbed_env({"PATH": "/usr/bin", "OPENAI_API_KEY": "sk", "HF_TOKEN": "t", "HOME": "/root",
                        "CUDA_VISIBLE_DEVICES": "0", "MY_PASSWORD": "p", "NVIDIA_VISIBLE_DEVICES": "all"}, {"X": "1"})
    assert env == {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0", "NVIDIA_VISIBLE_DEVICES": "all", "X": "1"}


@pytest.mark.parametrize("sandbox", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_the_child_does_not_see_secrets(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ROOFTOP_TEST_SECRET_TOKEN", "x")
    v = run("scale", "env_probe.py", sandbox=sandbox)
    assert v.status.value == "correct", v.messages
    assert v.sandbox == sandbox


@needs_bwrap
def test_reading_the_results_database_is_refused(tmp_path):
    db = tmp_path / "results" / "rooftop.db"
    db.parent.mkdir()
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
    solution = tmp_path / "reads_db.py"
    solution.write_text((FIXTURES / "solutions/good.py").read_text().replace(
        "return x * self.alpha", f"open({str(db)!r}, 'rb').read()\n        return x * self.alpha"))
    assert os.path.exists(db)
    v = run("scale", solution, sandbox="bwrap")
    assert v.status.value == "rejected" and "[sandbox]" in v.messages[0] and "rooftop.db" in v.messages[0]
    assert run("scale", solution, sandbox="none").status.value == "correct"  # readable without the sandbox


@needs_bwrap
def test_opening_a_socket_is_refused():
    v = run("scale", "opens_socket.py", sandbox="bwrap")
    assert v.status.value == "rejected" and "network" in v.messages[0]


@needs_bwrap
def test_writing_outside_scratch_is_refused():
    v = run("scale", "writes_system.py", sandbox="bwrap")
    assert v.status.value == "rejected" and "writing outside the scratch folder" in v.messages[0]
    assert not os.path.exists("/etc/rooftop-was-here")


@needs_bwrap
def test_other_solutions_are_not_visible(tmp_path):
    """A file solution sees only itself: its neighbours in the same folder are hidden."""
    neighbour = tmp_path / "secret_neighbour.py"
    neighbour.write_text("SECRET = 1\n")
    solution = tmp_path / "peeks.py"
    solution.write_text("import os\n" + (FIXTURES / "solutions/good.py").read_text().replace(
        "return x * self.alpha",
        f"if os.path.exists({str(neighbour)!r}):\n            raise RuntimeError('neighbour visible')\n"
        "        return x * self.alpha"))
    assert run("scale", solution, sandbox="bwrap").status.value == "correct"
    seen = run("scale", solution, sandbox="none")
    assert seen.status.value == "runtime_error" and "neighbour visible" in seen.messages[0]


def test_auto_without_bwrap_warns_on_the_verdict(monkeypatch):
    monkeypatch.setenv("ROOFTOP_BWRAP", "/nonexistent/bwrap")
    v = run("scale", "good.py")
    assert v.status.value == "correct" and v.sandbox == "none"
    assert v.warnings and "no sandbox" in v.warnings[0]


def _cli(*args: str, env: dict[str, str]):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True, check=False,
                          env={**os.environ, "COLUMNS": "200", **env}, timeout=300)


def _folder(tmp_path):
    """A folder of one solution, as `rooftop batch --problem` takes."""
    folder = tmp_path / "solutions"
    folder.mkdir(exist_ok=True)
    (folder / "good.py").write_text((FIXTURES / "solutions/good.py").read_text())
    return folder


def test_what_runs_candidates_for_others_refuses_auto_without_bwrap(tmp_path, monkeypatch):
    """On a machine without bubblewrap `--sandbox auto` quietly meant no sandbox for the server, a
    batch, the env and agent runs: a candidate then read the server's token from its parent."""
    from rooftop.agents.runner import AgentConfig
    from rooftop.agents.sweep import SweepConfig, run_sweep
    from rooftop.env import KernelEnv
    from rooftop.errors import UserError

    missing = {"ROOFTOP_BWRAP": "/nonexistent/bwrap"}
    good = _folder(tmp_path)
    for args in (["batch", str(good), "--problem", str(FIXTURES / "problems/scale"), "--device", "cpu",
                  "--db", str(tmp_path / "b.db")],
                 ["serve", "--device", "cpu", "--db", str(tmp_path / "s.db"), "--port", "1"]):
        proc = _cli(*args, env=missing)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        assert "--sandbox auto: bubblewrap is not installed" in line and "--sandbox none" in line, proc.stderr
    monkeypatch.setenv("ROOFTOP_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(UserError, match="settings.sandbox auto: bubblewrap is not installed"):
        KernelEnv(db=tmp_path / "e.db", device="cpu")
    sweep = SweepConfig(agents=[AgentConfig(adapter="claude")], problems=["examples/softmax"], device="cpu",
                        db=tmp_path / "a.db", out=tmp_path / "runs")
    with pytest.raises(UserError, match="--sandbox auto"):
        run_sweep(sweep)
    with pytest.raises(UserError, match="--agent-sandbox auto"):
        run_sweep(sweep.model_copy(update={"sandbox": "none"}))


def test_asking_for_no_sandbox_by_name_runs_and_every_view_says_so(tmp_path):
    from rooftop.env.view import agent_view, render

    proc = _cli("batch", str(_folder(tmp_path)), "--problem", str(FIXTURES / "problems/scale"),
                "--device", "cpu", "--sandbox", "none", "--db", str(tmp_path / "b.db"), "--json",
                env={"ROOFTOP_BWRAP": "/nonexistent/bwrap"})
    assert proc.returncode == 0, proc.stderr
    v = run("scale", "good.py", sandbox="none")
    assert v.status.value == "correct" and v.sandbox == "none"
    assert any(w.startswith("no sandbox (--sandbox none)") for w in v.warnings)
    view = agent_view(v, 0.0)
    assert view.unsandboxed and "no sandbox" in render(view).splitlines()[2]
    sandboxed = v.model_copy(update={"sandbox": "bwrap", "warnings": []})
    assert agent_view(sandboxed, 0.0).unsandboxed is None


def test_eval_says_first_that_it_runs_unsandboxed(tmp_path):
    proc = _cli("eval", str(FIXTURES / "problems/scale"), str(FIXTURES / "solutions/good.py"), "--device", "cpu",
                "--db", str(tmp_path / "e.db"), env={"ROOFTOP_BWRAP": "/nonexistent/bwrap"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[0].startswith("warning: no sandbox: bubblewrap is not installed")
