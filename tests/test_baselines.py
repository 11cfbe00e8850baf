"""Baselines: timed in process with the same method, stored by platform and problem version,
reused by evaluations; and the commands that make them."""

import json

import pytest
from conftest import FIXTURES, fixture_problem, run
from test_cli import rooftop

from rooftop.measure.baselines import Platform, time_baselines
from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline.trusted.scoring import attach_stored_baselines
from rooftop.store.db import Store

QUICK = TimingPolicy(warmup_calls=1, warmup_seconds=0, min_samples=3, min_seconds=0, target_rse=None, max_samples=5)
SCALE_SOTA = str(FIXTURES / "problems/scale_sota")


@pytest.mark.quiet
def test_eager_and_sota_are_checked_timed_and_recorded_per_shape():
    problem = fixture_problem("scale_sota")
    shapes = problem.spec.select("smoke")
    records = time_baselines(problem, shapes, "cpu", kinds=("eager", "sota"), policy=QUICK)
    assert [(r.shape, r.kind) for r in records] == [("tiny", "eager"), ("tiny", "sota")]
    for record in records:
        assert not record.error and record.stats.n == 3 and record.stats.median > 0
        assert record.platform.device == "cpu" and record.problem_version == 1 and record.params == {"B": 2, "N": 64}


def test_a_missing_library_or_a_wrong_baseline_is_recorded_not_timed(monkeypatch):
    problem = fixture_problem("scale_sota")
    shapes = problem.spec.select("smoke")
    monkeypatch.setenv("SCALE_SOTA_OFF", "1")
    [record] = time_baselines(problem, shapes, "cpu", kinds=("sota",), policy=QUICK)
    assert record.stats is None and "not available here: switched off by the test" in record.error
    assert time_baselines(fixture_problem("scale"), shapes, "cpu", kinds=("sota",), policy=QUICK) == []  # no sota.py
    import torch

    monkeypatch.delenv("SCALE_SOTA_OFF")
    monkeypatch.setattr(torch, "mul", lambda x, a: x * (a + 1))  # the 'library' now computes the wrong thing
    [record] = time_baselines(problem, shapes, "cpu", kinds=("sota",), policy=QUICK)
    assert record.stats is None and record.error.startswith("does not match the reference")


def test_a_problem_can_skip_a_baseline_kind_with_its_reason_but_never_eager():
    from pydantic import ValidationError

    problem = fixture_problem("scale_sota")
    spec = problem.spec.model_copy(update={"skip_baselines": {"sota": "the library needs a week"}})
    problem = problem.model_copy(update={"spec": spec})
    records = time_baselines(problem, spec.select("smoke"), "cpu", kinds=("eager", "sota"), policy=QUICK)
    assert [r.kind for r in records] == ["eager", "sota"]
    assert records[0].stats is not None
    assert records[1].stats is None and records[1].error == "not measured for this problem: the library needs a week"
    with pytest.raises(ValidationError):
        type(spec).model_validate({**spec.model_dump(), "skip_baselines": {"eager": "no"}})


def test_store_keeps_the_newest_record_per_shape_and_kind_and_keys_by_platform(tmp_path):
    problem = fixture_problem("scale_sota")
    shapes = problem.spec.select("smoke")
    store = Store(tmp_path / "r.db")
    first = time_baselines(problem, shapes, "cpu", kinds=("eager", "sota"), policy=QUICK)
    second = time_baselines(problem, shapes, "cpu", kinds=("sota",), policy=QUICK)
    store.baselines.save(first)
    store.baselines.save(second)
    here = first[0].platform
    got = store.baselines.newest(here, problem.name, 1)
    assert sorted(r.kind for r in got) == ["eager", "sota"]
    assert next(r for r in got if r.kind == "sota").stats.median == second[0].stats.median
    assert store.baselines.newest(here, problem.name, 2) == []  # a new problem version re-times
    other = Platform(**{**here.model_dump(), "torch": "0.0.0"})
    assert store.baselines.newest(other, problem.name, 1) == []  # so does a different torch
    assert store.baselines.newest(here, problem.name, 1, graphs=True) == []  # and another timing mode
    assert store.count("baselines") == 3


@pytest.mark.quiet
def test_an_evaluation_reads_speedups_over_the_stored_references(tmp_path):
    problem = fixture_problem("scale_sota")
    store = Store(tmp_path / "r.db")
    store.baselines.save(time_baselines(problem, problem.spec.select("smoke"), "cpu", kinds=("eager", "sota"),
                                        policy=QUICK))
    verdict = run("scale_sota", "good.py", shapes="smoke")
    assert verdict.status.value == "correct"
    assert attach_stored_baselines(verdict, store) == 2
    [shape] = verdict.shapes
    assert set(shape.baselines) == {"eager", "sota"} and set(shape.speedups) == {"eager", "sota"}
    assert shape.speedups["sota"] == pytest.approx(shape.baselines["sota"] / shape.candidate.median)
    assert shape.speedups["eager"] == shape.speedup  # eager stays the live, paired figure
    assert shape.speedup_low <= shape.speedup <= shape.speedup_high
    assert verdict.summary.geomean_speedups["sota"] == pytest.approx(shape.speedups["sota"])
    store.evaluations.record(verdict)
    assert store.evaluations.verdicts(problem.name)[0].shapes[0].speedups == shape.speedups


def test_baselines_command_times_stores_and_tables(tmp_path):
    db = tmp_path / "r.db"
    proc = rooftop("baselines", SCALE_SOTA, "--kinds", "eager,sota", "--device", "cpu", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(r["shape"], r["kind"]) for r in doc] == [("tiny", "eager"), ("tiny", "sota")]
    assert all(r["stats"]["median"] > 0 for r in doc)
    proc = rooftop("eval", SCALE_SOTA, str(FIXTURES / "solutions/good.py"), "--db", str(db))
    assert proc.returncode == 0 and "vs sota" in proc.stdout, proc.stdout


@pytest.mark.quiet
def test_self_checks_store_the_spread_between_processes_and_later_intervals_hold_it(tmp_path):
    db = tmp_path / "r.db"
    proc = rooftop("baselines", SCALE_SOTA, "--kinds", "self", "--self-checks", "2", "--device", "cpu",
                   "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    [record] = json.loads(proc.stdout)
    assert (record["shape"], record["kind"], record["error"]) == ("tiny", "self", ""), record
    assert len(record["speedups"]) == 2 and all(s > 0 for s in record["speedups"])
    proc = rooftop("eval", SCALE_SOTA, str(FIXTURES / "solutions/good.py"), "--device", "cpu", "--db", str(db),
                   "--json")
    [shape] = json.loads(proc.stdout)["shapes"]
    assert shape["spread_source"] == "2 self-checks in fresh processes" and shape["speedup_spread"] > 0
    assert shape["speedup_low"] < shape["speedup"] < shape["speedup_high"]


@pytest.mark.parametrize("args,needle", [
    (["baselines", SCALE_SOTA, "--kinds", "eager,jit"], "--kinds"),
    (["baselines", SCALE_SOTA, "--compile-mode", "fastest"], "--compile-mode"),
    (["baselines", "no_such_deck_or_problem"], "no_such_deck_or_problem"),
    (["baselines", SCALE_SOTA, "--device", "cpu", "--graphs"], "--graphs"),
    (["eval", SCALE_SOTA, str(FIXTURES / "solutions/good.py"), "--device", "cpu", "--graphs"], "--graphs"),
])
def test_baselines_usage_errors_are_one_line_and_exit_2(args, needle, tmp_path):
    proc = rooftop(*args, "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_calibrate_needs_a_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = rooftop("calibrate", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and "no CUDA GPU" in proc.stderr


def test_compile_baseline_on_the_cpu():
    problem = fixture_problem("scale")
    [record] = time_baselines(problem, problem.spec.select("smoke"), "cpu", kinds=("compile",), policy=QUICK)
    assert not record.error and record.stats.n == 3 and record.mode == "default"
