"""`rooftop results` as a user runs it, against a database filled with hand-made verdicts."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES

from rooftop.measure.measurement import TimingStats
from rooftop.store.db import Store
from rooftop.verdict import Environment, ShapeResult, Status, Summary, Verdict


def rooftop(*args, cwd=None):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True,
                          check=False, cwd=cwd, env=env, timeout=120)


def made(problem: str, solution: str, status: str, reward: float | None, speedup: float | None = None) -> Verdict:
    env = Environment(device="cpu", device_name="test-cpu", mode="cpu", python="3.11", torch="2.5",
                      platform="Linux", hostname="h", rooftop="0.1")
    shape = ShapeResult(shape="tiny", split="visible", params={"N": 8}, correct=status == "correct",
                        candidate=TimingStats(clock="fake", samples=[1e-3, 2e-3, 3e-3]))
    return Verdict(status=Status(status), reward=reward, problem=problem, problem_version=1,
                   solution=f"/somewhere/solutions/{solution}", source_hash="h", environment=env, shapes=[shape],
                   messages=[f"message of {solution}"], summary=Summary(geomean_speedup=speedup), wall_seconds=1.5)


VERDICTS = [  # ids 1..4 in this order
    made("/data/one/scale", "good.py", "correct", 0.25, 1.25),
    made("examples/softmax", "wrong.py", "incorrect", -2.0),
    made("/data/two/upscale", "slow.py", "timeout", -7.0),
    made("/data/two/scale", "better.py", "correct", 0.5, 1.5),
]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.db"
    store = Store(path)
    store.evaluations.start_run("test")
    for verdict in VERDICTS:
        store.evaluations.record(verdict)
    store.close()
    return str(path)


def listed(db: str, *args: str) -> list[dict]:
    proc = rooftop("results", "--json", "--db", db, *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_line_error(proc, needle: str) -> None:
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_lists_every_evaluation_newest_first(db):
    proc = rooftop("results", "--db", db)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for needle in ("/data/one/scale", "examples/softmax", "good.py", "wrong.py", "timeout", "+0.250", "1.250x",
                   "test-cpu", "1.5 s"):
        assert needle in text
    assert "/somewhere/solutions" not in text  # the solution column holds the file name only
    assert text.index("better.py") < text.index("slow.py") < text.index("wrong.py") < text.index("good.py")


def test_json_rows_carry_the_columns(db):
    rows = listed(db)
    assert [r["id"] for r in rows] == [4, 3, 2, 1]
    first = rows[-1]
    assert first["problem"] == "/data/one/scale" and first["status"] == "correct" and first["reward"] == 0.25
    assert first["solution"] == "/somewhere/solutions/good.py" and first["geomean_speedup"] == 1.25
    assert first["device"] == "cpu" and first["device_name"] == "test-cpu" and first["wall_seconds"] == 1.5
    assert "verdict_json" not in first


@pytest.mark.parametrize("problem,ids", [
    ("scale", [4, 1]),  # trailing path component: both folders named scale, not upscale
    ("two/scale", [4]),
    ("/data/two/upscale", [3]),  # exact
    ("examples/softmax", [2]),
    ("softmax", [2]),
    ("cale", []),  # not a substring match
])
def test_problem_filter_matches_exactly_or_by_trailing_components(db, problem, ids):
    assert [r["id"] for r in listed(db, "--problem", problem)] == ids


def test_problem_filter_takes_an_existing_path(db, tmp_path):
    # a problem loaded from a folder is stored under its resolved path; the same folder, typed
    # relative to the working directory, finds it
    folder = tmp_path / "work" / "scale"
    folder.mkdir(parents=True)
    store = Store(db)
    store.evaluations.record(made(str(folder.resolve()), "here.py", "correct", 0.1))
    store.close()
    proc = rooftop("results", "--json", "--db", db, "--problem", "./scale", cwd=tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in json.loads(proc.stdout)] == [5]


def test_status_and_last_filters(db):
    assert [r["id"] for r in listed(db, "--status", "correct")] == [4, 1]
    assert [r["id"] for r in listed(db, "--status", "timeout")] == [3]
    assert [r["id"] for r in listed(db, "--last", "2")] == [4, 3]
    assert [r["id"] for r in listed(db, "--status", "correct", "--last", "1")] == [4]
    assert [r["id"] for r in listed(db, "--problem", "scale", "--status", "correct", "--last", "5")] == [4, 1]


def test_an_empty_result_says_so(db):
    proc = rooftop("results", "--db", db, "--status", "rejected")
    assert proc.returncode == 0 and "no evaluations" in proc.stdout and "--status rejected" in proc.stdout
    assert listed(db, "--problem", "nothing/here") == []


def test_show_prints_the_verdict_like_eval(db):
    proc = rooftop("results", "show", "2", "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert "incorrect" in proc.stdout and "examples/softmax v1" in proc.stdout and "wrong.py" in proc.stdout
    assert "message of wrong.py" in proc.stdout and "tiny" in proc.stdout


def test_show_json_is_the_stored_verdict(db):
    proc = rooftop("results", "show", "4", "--json", "--db", db)
    assert proc.returncode == 0, proc.stderr
    shown = Verdict.model_validate_json(proc.stdout)
    assert shown == VERDICTS[3]


@pytest.mark.parametrize("args,needle", [
    (["--status", "fine"], "--status"),
    (["show", "99"], "99"),
    (["show", "one"], "ID"),
    (["--last", "0"], "--last"),
])
def test_bad_arguments_exit_2_with_one_line(db, args, needle):
    proc = rooftop("results", *args, "--db", db)
    one_line_error(proc, needle)
    if args[0] == "--status":
        assert all(s.value in proc.stderr for s in Status)  # the valid values are listed


@pytest.mark.parametrize("args", [[], ["--json"], ["show", "1"]])
def test_a_missing_database_is_an_error_and_is_not_created(tmp_path, args):
    missing = tmp_path / "nowhere" / "r.db"
    proc = rooftop("results", *args, "--db", str(missing))
    one_line_error(proc, str(missing))
    assert not missing.exists() and not missing.parent.exists()


def test_listing_and_showing_do_not_import_torch(db):
    snippet = ("import sys\nfrom rooftop.cli.main import app\n"
               f"for args in (['results', '--json', '--db', {db!r}], ['results', '--db', {db!r}],\n"
               f"             ['results', 'show', '1', '--db', {db!r}]):\n"
               "    app(args, standalone_mode=False)\n"
               "assert 'torch' not in sys.modules, 'torch was imported'\n")
    proc = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"problem": "/data/one/scale"' in proc.stdout  # the commands did run


def test_same_spec_name_in_two_folders_gets_two_stored_names(tmp_path):
    from rooftop.problem.loader import load_problem

    one, two = tmp_path / "one" / "scale", tmp_path / "two" / "scale"
    shutil.copytree(FIXTURES / "problems/scale", one)
    shutil.copytree(FIXTURES / "problems/scale", two)
    a, b = load_problem(one), load_problem(two)
    assert a.spec.name == b.spec.name
    assert a.name != b.name
    assert a.name == str(one.resolve()) and b.name == str(two.resolve())
    kernelbench = load_problem(FIXTURES / "kernelbench_relu.py")
    assert kernelbench.name == str((FIXTURES / "kernelbench_relu.py").resolve())


def test_bundled_problems_keep_their_deck_name():
    from rooftop.problem.registry import resolve

    assert resolve("examples/softmax").name == "examples/softmax"
