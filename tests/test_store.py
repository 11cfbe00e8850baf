import sqlite3

import pytest

from rooftop.errors import UserError
from rooftop.measure.measurement import TimingStats
from rooftop.store.db import Store
from rooftop.verdict import Environment, ShapeResult, Status, Verdict


def verdict(status="correct", reward=0.5) -> Verdict:
    env = Environment(device="cpu", device_name="x86_64", mode="cpu", python="3.11", torch="2.13",
                      platform="Linux", hostname="h", rooftop="0.1")
    shape = ShapeResult(shape="a", split="visible", params={"N": 1}, correct=True,
                        candidate=TimingStats(clock="fake", samples=[1.0, 2.0, 3.0]),
                        reference=TimingStats(clock="fake", samples=[2.0]), speedup=1.0)
    return Verdict(status=Status(status), reward=reward, problem="p", problem_version=2, solution="s.py",
                   source_hash="abc", environment=env, shapes=[shape])


def test_records_are_committed_one_by_one_and_survive(tmp_path):
    path = tmp_path / "r.db"
    store = Store(path)
    store.evaluations.start_run("test")
    store.evaluations.record(verdict())
    # a second connection sees the row before the first one closes: a crash now loses nothing
    other = sqlite3.connect(path)
    assert other.execute("SELECT status, reward, problem_version FROM evaluations").fetchall() == [("correct", 0.5, 2)]
    assert other.execute("SELECT shape, median_s, n FROM shape_results").fetchall() == [("a", 2.0, 3)]
    store.evaluations.record(verdict("incorrect", -2.0))
    store.close()
    reopened = Store(path)
    assert reopened.count() == 2 and reopened.count("runs") == 1
    [first, second] = reopened.evaluations.verdicts()
    assert first.shapes[0].candidate.samples == [1.0, 2.0, 3.0] and second.status is Status.incorrect


def test_not_a_database_is_a_user_error(tmp_path):
    path = tmp_path / "junk.db"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(UserError, match="junk.db"):
        Store(path)


def test_evaluations_filter_newest_first_and_verdict_reads_one_back(tmp_path):
    store = Store(tmp_path / "r.db")
    for problem, status in (("/a/scale", "correct"), ("/a/upscale", "correct"), ("deck/scale", "incorrect"),
                            ("/b/scale", "correct")):
        v = verdict(status)
        store.evaluations.record(v.model_copy(update={"problem": problem}))
    assert [r.id for r in store.evaluations.rows()] == [4, 3, 2, 1]
    assert [r.id for r in store.evaluations.rows(problem="scale")] == [4, 3, 1]
    assert [r.id for r in store.evaluations.rows(problem="SCALE")] == []  # paths are case-sensitive
    assert [r.id for r in store.evaluations.rows(problem=["/a/upscale", "deck/scale"])] == [3, 2]
    assert [r.id for r in store.evaluations.rows(problem="scale", status=Status.correct, last=1)] == [4]
    row = store.evaluations.rows(last=1)[0]
    assert row.problem == "/b/scale" and row.status is Status.correct and row.device_name == "x86_64"
    third = store.evaluations.verdict(3)
    assert third is not None and third.problem == "deck/scale" and third.status is Status.incorrect
    assert store.evaluations.verdict(99) is None


def test_a_reader_never_creates_a_database(tmp_path):
    path = tmp_path / "sub" / "r.db"
    with pytest.raises(UserError, match="r.db"):
        Store(path, must_exist=True)
    assert not path.exists() and not path.parent.exists()
    Store(path).close()
    assert Store(path, must_exist=True).evaluations.rows() == []
