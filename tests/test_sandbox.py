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
