"""The `rooftop` command as a user runs it: a real subprocess, real exit codes."""

import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES

SCALE = str(FIXTURES / "problems/scale")


def rooftop(*args, cwd=None):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def test_eval_json_has_status_and_reward_on_top(tmp_path):
    db = tmp_path / "r.db"
    proc = rooftop("eval", SCALE, str(FIXTURES / "solutions/good.py"), "--json", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # stdout holds only the document
    assert doc["status"] == "correct" and isinstance(doc["reward"], float)
    assert doc["environment"]["device"] == "cpu" and doc["shapes"][0]["candidate"]["median"] > 0
    assert db.exists()


def test_eval_exit_zero_for_a_failing_verdict_and_prints_a_table(tmp_path):
    proc = rooftop("eval", SCALE, str(FIXTURES / "solutions/wrong.py"), "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0
    assert "incorrect" in proc.stdout and "tiny" in proc.stdout and "max abs error" in proc.stdout


@pytest.mark.parametrize("args,needle", [
    (["eval", "no/such/problem", "x.py"], "no/such/problem"),
    (["eval", SCALE, "missing_solution.py"], "missing_solution.py"),
    (["eval", SCALE, str(FIXTURES / "solutions/good.py"), "--device", "tpu"], "--device"),
    (["eval", str(FIXTURES / "problems"), str(FIXTURES / "solutions/good.py")], "problem.yaml"),
    (["problems", "show", "examples/nope"], "examples/nope"),
    (["eval", SCALE, str(FIXTURES / "solutions/good.py"), "--timeout", "0"], "--timeout"),
    (["eval", SCALE], "Missing argument"),
    (["frobnicate"], "frobnicate"),
])
def test_bad_input_exits_2_with_one_line_and_no_traceback(args, needle, tmp_path):
    proc = rooftop(*args, "--db", str(tmp_path / "r.db")) if args[0] == "eval" and len(args) > 2 else rooftop(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_invalid_spec_names_file_and_field(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "problem.yaml").write_text((FIXTURES / "problems/scale/problem.yaml").read_text() + "colour: red\n")
    (bad / "reference.py").write_text((FIXTURES / "problems/scale/reference.py").read_text())
    proc = rooftop("eval", str(bad), str(FIXTURES / "solutions/good.py"), "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and "problem.yaml: colour: unknown key" in proc.stderr


def test_problems_list_and_show():
    listing = rooftop("problems", "--json")
    assert listing.returncode == 0
    names = [p["name"] for p in json.loads(listing.stdout)]
    assert len(names) >= 6 and all(n.startswith("examples/") for n in names if "examples" in n)
    show = rooftop("problems", "show", "examples/softmax")
    assert show.returncode == 0 and "held_out" in show.stdout and "policy" in show.stdout


def test_kernelbench_file_as_problem(tmp_path):
    proc = rooftop("eval", str(FIXTURES / "kernelbench_relu.py"), str(FIXTURES / "solutions/relu_new.py"),
                   "--json", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["status"] == "correct"
