"""`rooftop report` and `rooftop annotate` against a store of hand-made agent runs: two agents x two
problems x two repeats on an H100 (verdicts built so that every figure is known in advance), and
stored baselines. No agent runs, no GPU."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, fixture_problem

from rooftop.agents.record import AgentRun, Grade
from rooftop.measure.measurement import TimingStats
from rooftop.score.hardware import lookup
from rooftop.score.roofline import floor_seconds
from rooftop.service.jobs import SourceSnapshot
from rooftop.service.queue import JobQueue, JobState
from rooftop.store.db import Store
from rooftop.transcripts.usage import Usage
from rooftop.verdict import Environment, ShapeResult, Status, Summary, Verdict
from rooftop.vocabulary import Settings

H100 = "NVIDIA H100 80GB HBM3"
SCALE, LINEAR = fixture_problem("scale"), fixture_problem("linear")
COMPILE_RF, SOTA_RF = 0.25, 0.8  # the stored baselines of scale, as roofline fractions
SOLUTION = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2.0\n"

# agent, model, problem, repeat: status, roofline fraction, speedup over eager (eager's fraction is rf / speedup:
# 0.2 on scale, 0.1 on linear), held-out shapes correct
RUNS = [
    ("alpha", "m1", SCALE, 0, "correct", 0.4, 2.0),
    ("alpha", "m1", SCALE, 1, "correct", 0.6, 3.0),
    ("alpha", "m1", LINEAR, 0, "correct", 0.3, 3.0),
    ("alpha", "m1", LINEAR, 1, "incorrect", None, None),
    ("beta", None, SCALE, 0, "incorrect", None, None),
    ("beta", None, SCALE, 1, "correct", 0.2, 1.0),
    ("beta", None, LINEAR, 0, "no_solution", None, None),
    ("beta", None, LINEAR, 1, "correct", 0.1, 1.0),
]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The `rooftop` command with `report` and `annotate` registered (where main.py does not yet)."""
    code = ("import sys\nfrom rooftop.cli import main as m\nfrom rooftop.cli.report import register\n"
            "if 'report' not in {c.name for c in m.app.registered_commands}:\n    register(m.app)\n"
            "sys.argv = ['rooftop', *sys.argv[1:]]\nm.main()\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"}, cwd=cwd)


def one_line_error(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rooftop: error: ") and needle in lines[0], proc.stderr


def verdict(problem, status: str, rf: float | None, speedup: float | None) -> Verdict:
    gpu = lookup(H100)
    env = Environment(device="cuda", device_name=H100, mode="gpu", gpu_key=gpu.key, python="3.11", torch="2.5",
                      platform="Linux", hostname="h", rooftop="0.1")
    shapes, spec = [], problem.spec
    for shape in spec.shapes:
        flops, nbytes = spec.flops_for(shape), spec.bytes_for(shape)
        result = ShapeResult(shape=shape.name, split=shape.split.value, params=shape.params, flops=flops, bytes=nbytes,
                             correct=status == "correct")
        if rf is not None and speedup is not None:
            floor = floor_seconds(gpu, spec.dtype, flops, nbytes)
            seconds = floor / rf
            result.candidate = TimingStats(clock="cuda_event", samples=[seconds] * 5)
            result.reference = TimingStats(clock="cuda_event", samples=[seconds * speedup] * 5)
            result.roofline_fraction, result.speedup = rf, speedup
            result.tflops, result.gbps = flops / seconds / 1e12, nbytes / seconds / 1e9
            result.speedups = {"eager": speedup}
            if problem is SCALE:
                result.baselines = {"compile": floor / COMPILE_RF, "sota": floor / SOTA_RF}
                result.speedups |= {"compile": rf / COMPILE_RF, "sota": rf / SOTA_RF}
        shapes.append(result)
    timed = [s for s in shapes if s.candidate]
    summary = Summary(shapes=len(shapes), correct_shapes=sum(bool(s.correct) for s in shapes),
                      geomean_speedup=speedup if timed else None, geomean_roofline=rf if timed else None,
                      geomean_speedups=dict(timed[0].speedups) if timed else {})
    return Verdict(status=Status(status), reward=0.1, problem=problem.name, problem_version=1,
                   solution="workspace", source_hash="h" + status, shapes_selected="all", shapes=shapes,
                   summary=summary, environment=env, messages=[] if status == "correct" else ["wrong"])


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """The store and the run folders; alpha's verdicts are found through their jobs, beta's in the
    run folders."""
    root = tmp_path_factory.mktemp("sweep")
    store = Store(root / "r.db")
    store.evaluations.start_run("test")
    queue = JobQueue(store)
    for agent, model, problem, repeat, status, rf, speedup in RUNS:
        ident = f"run_{agent}_{Path(problem.name).name}_{repeat}"
        folder = root / "runs" / ident
        (folder / "workspace").mkdir(parents=True)
        (folder / "workspace" / "solution.py").write_text(SOLUTION)
        (folder / "transcript.jsonl").write_text('{"type": "start"}\n{"type": "text", "text": "use torch"}\n')
        if status == "no_solution":
            graded = Grade(shapes="all", status=status, message="no solution.py")
        else:
            made = verdict(problem, status, rf, speedup)
            job = None
            if agent == "alpha":
                job, _ = queue.submit(problem, SourceSnapshot.from_code(SOLUTION + f"# {repeat}\n"),
                                      Settings(device="cpu", shapes="all"), label=f"agent:{ident}:graded")
                queue.claim(JobState.built, JobState.running, ids=[job])  # nothing to compile
                assert queue.finish(job, made) is not None
            else:
                (folder / "verdicts").mkdir()
                (folder / "verdicts" / "graded.json").write_text(made.model_dump_json())
            graded = Grade.of("all", job, made)
        usage = (Usage(input_tokens=1000, output_tokens=200, cost_usd=0.5 + 0.2 * repeat) if agent == "alpha"
                 else Usage())
        run = AgentRun(id=ident, sweep="s1", agent=agent, adapter="fake", model=model, problem=problem.name,
                       repeat=repeat, state="done", started_at="2026-01-01T00:00:00+00:00",
                       wall_s=100.0 + 200 * repeat, completed=True, usage=usage, graded=graded, folder=str(folder))
        store.agent_runs.save(ident, sweep="s1", agent=agent, model=model, problem=problem.name, repeat=repeat,
                              state="done", visible_job=None, graded_job=graded.job, record_json=run.model_dump_json())
    failed = AgentRun(id="run_failed", sweep="s1", agent="alpha", adapter="fake", model="m1", problem=SCALE.name,
                      state="failed", started_at="2026-01-01T00:00:00+00:00", error="could not start")
    store.agent_runs.save("run_failed", sweep="s1", agent="alpha", model="m1", problem=SCALE.name, repeat=2,
                          state="failed", visible_job=None, graded_job=None, record_json=failed.model_dump_json())
    _save_baselines(store)
    store.close()
    return root


def _save_baselines(store: Store) -> None:
    from rooftop.measure.baselines import BaselineRecord, Platform

    gpu = lookup(H100)
    platform = Platform(device="cuda", device_name=H100, torch="2.5")
    records = []
    for shape in SCALE.spec.shapes:
        floor = floor_seconds(gpu, "float32", SCALE.spec.flops_for(shape), SCALE.spec.bytes_for(shape))
        for kind, rf in (("compile", COMPILE_RF), ("sota", SOTA_RF)):
            records.append(BaselineRecord(platform=platform, problem=SCALE.name, problem_version=1, shape=shape.name,
                                          params=shape.params, kind=kind, mode="default" if kind == "compile" else "",
                                          stats=TimingStats(clock="cuda_event", samples=[floor / rf] * 3)))
    store.baselines.save(records)


@pytest.fixture
def db(sweep, tmp_path) -> Path:
    """A copy of the store a test may write to (annotations); the run folders are shared."""
    shutil.copy(sweep / "r.db", tmp_path / "r.db")
    return tmp_path / "r.db"


@pytest.fixture(scope="module")
def report(sweep, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("report")
    proc = cli("report", "--db", str(sweep / "r.db"), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


def cells(document: dict) -> dict[tuple[str, str], dict]:
    names = {p["name"]: p["display"] for p in document["problems"]}
    return {(row["label"], names[p]): c for row in document["rows"] for p, c in row["cells"].items()}


def test_cells_count_repeats_passes_and_held_out(report):
    _, document = report
    assert document["source"] == "agent_runs" and document["devices"] == [H100]
    assert [r["label"] for r in document["rows"]] == ["alpha / m1", "beta / default"]  # best overall roofline first
    got = cells(document)
    a = got[("alpha / m1", "scale")]
    assert (a["runs"], a["passed"], a["held_out_passed"], a["held_out_runs"], a["held_out_rate"]) == (2, 2, 2, 2, 1.0)
    assert a["roofline"]["mean"] == pytest.approx(0.5)
    assert a["roofline"]["low"] == 0.0  # 0.5 - 12.706 x 0.1, clipped
    assert a["roofline"]["high"] == 1.0  # 0.5 + 12.706 x 0.1, clipped
    assert (a["roofline"]["min"], a["roofline"]["max"]) == (pytest.approx(0.4), pytest.approx(0.6))
    assert a["speedups"]["eager"] == pytest.approx(6 ** 0.5)
    assert a["speedups"]["compile"] == pytest.approx((1.6 * 2.4) ** 0.5)
    assert a["speedups"]["sota"] == pytest.approx((0.5 * 0.75) ** 0.5)
    assert (a["input_tokens"], a["output_tokens"]) == (1000, 200)
    assert (a["cost_usd"], a["cost_total_usd"], a["wall_s"]) == (pytest.approx(0.6), pytest.approx(1.2), 200)
    linear = got[("alpha / m1", "linear")]
    assert (linear["passed"], linear["held_out_rate"]) == (1, None)  # linear has no held-out shapes
    assert linear["roofline"]["mean"] == pytest.approx(0.15)  # the failed repeat counts 0
    assert [x["roofline"] for x in linear["attempts"]] == [pytest.approx(0.3), 0.0]
    b = got[("beta / default", "scale")]
    assert (b["passed"], b["held_out_passed"], b["held_out_rate"], b["held_out_shapes"]) == (1, 1, 0.5, 2)
    assert b["roofline"]["mean"] == pytest.approx(0.1)
    assert b["input_tokens"] is None and b["cost_usd"] is None
    assert got[("beta / default", "linear")]["roofline"]["mean"] == pytest.approx(0.05)
    assert [a["status"] for a in got[("beta / default", "linear")]["attempts"]] == ["no_solution", "correct"]
    alpha = document["rows"][0]
    assert alpha["overall"]["runs"] == 4 and alpha["overall"]["passed"] == 3  # the failed harness run is not one
    assert alpha["overall"]["held_out_runs"] == 2  # linear has no held-out shapes
    assert alpha["fast_p"] == {"0": 0.75, "1": 0.75, "1.5": 0.75, "2": 0.5}
    assert document["rows"][1]["fast_p"]["1"] == 0.0  # 1.0x eager is not faster


def test_reference_rows_come_from_baselines_and_verdicts(report):
    _, document = report
    refs = {(r["kind"], p): c for r in document["references"] for p, c in r["cells"].items()}
    assert [r["kind"] for r in document["references"]] == ["eager", "compile", "sota"]
    assert refs[("eager", SCALE.name)]["roofline"] == pytest.approx(0.2)
    assert refs[("eager", SCALE.name)]["source"] == "verdicts"
    assert refs[("compile", SCALE.name)]["roofline"] == pytest.approx(COMPILE_RF)
    assert refs[("compile", SCALE.name)]["source"] == "baselines"
    assert refs[("sota", SCALE.name)]["roofline"] == pytest.approx(SOTA_RF)
    assert refs[("sota", SCALE.name)]["speedup_over_eager"] == pytest.approx(SOTA_RF / 0.2)
    assert refs[("eager", LINEAR.name)]["roofline"] == pytest.approx(0.1)
    assert ("compile", LINEAR.name) not in refs


def test_markdown_shows_the_figures_and_interval(report):
    out, _ = report
    text = (out / "leaderboard.md").read_text()
    assert ("| alpha / m1 | 15.0% (0.0-100.0) · 1/2 · 3x | 50.0% (0.0-100.0) · 2/2 · 2.45x "
            "| 32.5% (0.0-72.3) · 3/4 · 2.62x |") in text
    assert "Student-t 95%" in text
    assert "| eager | 10.0% | 20.0% |  |" in text and "| sota | - | 80.0% |  |" in text
    assert "| beta / default | scale | 2 | 1 | 10.0% | 0.0%-100.0% | 1/2 | 1x | 0.8x | 0.25x | - | - | - | 200 |" \
        in text
    assert "| alpha / m1 | all problems | 4 | 3 | 32.5% | 0.0%-72.3% | 2/2 | 2.62x |" in text
    assert "![fast_p](plots/fast_p.png)" in text


def test_html_is_self_contained_and_its_plots_exist(report):
    out, document = report
    page = (out / "leaderboard.html").read_text()
    assert "<style>" in page and "<script" not in page and "http" not in page
    images = [line.split('src="', 1)[1].split('"', 1)[0] for line in page.splitlines() if "<img " in line]
    assert images and set(images) == set(document["plots"])
    for image in images:
        png, svg = out / image, (out / image).with_suffix(".svg")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert svg.read_text().lstrip().startswith("<?xml") and svg.stat().st_size > 5000
    names = {Path(p).name for p in document["plots"]}
    assert names == {"roofline-scale.png", "roofline-linear.png", "fast_p.png", "speedup-problems.png"}
    assert {p["display"]: p["plots"] for p in document["problems"]} == {
        "linear": ["plots/roofline-linear.png"], "scale": ["plots/roofline-scale.png"]}


def test_sweep_and_deck_filters(sweep, tmp_path):
    proc = cli("report", "--db", str(sweep / "r.db"), "-o", str(tmp_path / "a"), "--sweep", "nope")
    one_line_error(proc, "--sweep nope: no finished agent runs")
    proc = cli("report", "--db", str(sweep / "r.db"), "-o", str(tmp_path / "b"), "--deck", "problems")
    assert proc.returncode == 0, proc.stderr
    assert "alpha / m1" in proc.stdout and "wrote" in proc.stdout


def test_empty_and_missing_stores_say_so(tmp_path):
    Store(tmp_path / "e.db").close()
    one_line_error(cli("report", "--db", str(tmp_path / "e.db"), "-o", str(tmp_path / "o")), "nothing to report")
    one_line_error(cli("report", "--db", str(tmp_path / "none.db")), "no such results database")
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "o").exists()


def test_annotate_stores_a_checked_quote_and_the_report_marks_the_cell(db, tmp_path):
    folder = Path(json.loads(Store(db).agent_runs.runs()[0].record_json)["folder"])  # alpha's first run on scale
    proc = cli("annotate", folder.name, "--db", str(db), "--verdict", "reward_hack", "--summary", "returns x * 2",
               "--quote", "workspace/solution.py:5-6:the forward=def forward(self, x):  return x",
               "--quote", "transcript.jsonl:2", "--json")
    assert proc.returncode == 0, proc.stderr
    note = json.loads(proc.stdout)
    assert note["run_id"] == folder.name and note["verdict"] == "reward_hack" and note["id"] == 1
    assert note["quotes"][0] == {"file": "workspace/solution.py", "start": 5, "end": 6, "label": "the forward",
                                 "text": "    def forward(self, x):\n        return x * 2.0"}
    assert note["quotes"][1]["text"] == '{"type": "text", "text": "use torch"}'
    listed = cli("annotate", str(folder), "--db", str(db), "--json")  # the folder names the run too
    assert listed.returncode == 0 and [n["id"] for n in json.loads(listed.stdout)] == [1]
    shown = cli("annotate", folder.name, "--db", str(db))
    assert "reward_hack" in shown.stdout and "workspace/solution.py:5-6" in shown.stdout
    out = tmp_path / "report"
    proc = cli("report", "--db", str(db), "-o", str(out), "--json")
    document = json.loads(proc.stdout)
    marked = cells(document)[("alpha / m1", "scale")]
    assert marked["marks"] == ["reward_hack"] and marked["attempts"][0]["notes"] == ["reward_hack"]
    assert cells(document)[("alpha / m1", "linear")]["marks"] == []
    assert document["annotations"][0]["quotes"][0]["label"] == "the forward"
    assert "· 2/2 · 2.45x ‡ |" in (out / "leaderboard.md").read_text()
    assert '<span class="mark">‡</span>' in (out / "leaderboard.html").read_text()


@pytest.mark.parametrize("spec, needle", [
    ("workspace/solution.py:5-12", "lines 5-12 are outside workspace/solution.py, which has 6 lines"),
    ("workspace/solution.py:0", "outside"),
    ("workspace/nope.py:1", "no file workspace/nope.py"),
    ("workspace/solution.py:6=return x * 3.0", "does not contain that text"),
    ("../../r.db:1", "not inside the run folder"),
    ("solution.py", "expected FILE:LINES"),
])
def test_annotate_refuses_quotes_that_do_not_match(db, spec, needle):
    run_id = json.loads(Store(db).agent_runs.runs()[0].record_json)["id"]
    one_line_error(cli("annotate", run_id, "--db", str(db), "--verdict", "bug", "--quote", spec), needle)
    assert json.loads(cli("annotate", run_id, "--db", str(db), "--json").stdout) == []  # nothing stored


def test_annotate_needs_a_known_run(db):
    one_line_error(cli("annotate", "no-such-run", "--db", str(db), "--verdict", "clean"), "neither an agent run id")
    one_line_error(cli("annotate", "run_alpha_scale_0", "--db", str(db), "--quote", "transcript.jsonl:1"),
                   "give --verdict too")


def test_without_agent_runs_the_rows_are_solutions(tmp_path):
    """A real CPU evaluation and a hand-made GPU one: rows by language, rooflines where a device has roofs."""
    from rooftop.api import run_evaluation

    store = Store(tmp_path / "e.db")
    run_evaluation(FIXTURES / "problems/scale", FIXTURES / "solutions/good.py", Settings(device="cpu", shapes="all",
                                                                                       timeout=60), store=store)
    made = verdict(SCALE, "correct", 0.5, 2.0).model_copy(update={"languages": ["triton"]})
    store.evaluations.record(made)
    store.evaluations.record(made)  # the same source again: one entry
    store.close()
    out = tmp_path / "out"
    proc = cli("report", "--db", str(tmp_path / "e.db"), "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert document["source"] == "evaluations"
    rows = {r["label"]: r for r in document["rows"]}
    assert set(rows) == {"solutions: pytorch", "solutions: triton"}
    assert rows["solutions: triton"]["overall"]["runs"] == 1
    assert rows["solutions: triton"]["overall"]["roofline"]["mean"] == pytest.approx(0.5)
    cpu = rows["solutions: pytorch"]["overall"]
    assert cpu["passed"] == 1 and cpu["roofline"]["mean"] is None and cpu["held_out_rate"] == 1.0
    assert sorted(document["devices"])[0] == H100
    assert (out / "plots" / "roofline-scale-NVIDIA-H100-80GB-HBM3.png").is_file()
    assert (out / "leaderboard.html").is_file() and "solutions: pytorch" in (out / "leaderboard.md").read_text()
