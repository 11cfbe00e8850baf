"""What a newcomer tripped on, each pinned by a test: silence during a hang, a misleading header
on a static failure, a problem's own bug recorded against the solution, one shape by name, a
missing ModelNew, and the event stream and cancellation that the progress display rests on."""

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import threading

import pytest
from conftest import FIXTURES, fixture_problem, run

SCALE = FIXTURES / "problems/scale"


def rooftop(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True,
                          timeout=300, **kwargs)


def test_a_hang_is_reported_gate_by_gate_and_stopped_in_seconds_on_a_cpu(tmp_path):
    """No --timeout: the limit comes from the device and the problem (a CPU smoke shape gets
    seconds, not minutes); piped stderr names each gate as it starts, with its limit."""
    proc = rooftop("eval", str(SCALE), str(FIXTURES / "solutions/hang.py"), "--device", "cpu",
                   "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0 and "timeout" in proc.stdout
    lines = proc.stderr.strip().splitlines()
    gates = [line.split(": ", 1)[1].split(" ")[0] for line in lines if ": " in line]
    assert gates[:4] == ["static", "build", "load", "correctness"], lines
    # the limit the hang was stopped at is stated, and it is seconds (what a wall-clock bound here stood for)
    limits = [float(m) for line in lines for m in re.findall(r"correctness \(1 shape, limit (\d+(?:\.\d+)?) s", line)]
    assert limits and limits[0] <= 30, lines
    assert any("correctness failed" in line and "timeout" in line for line in lines), lines


def test_a_static_failure_says_nothing_ran():
    v = run("scale", "forbidden.py")
    assert v.status.value == "rejected" and v.sandbox == "not started"
    assert "refused before any process started" in v.environment.mode
    assert "unknown" not in v.environment.device_name


def test_a_problem_whose_code_does_not_fit_its_shapes_exits_2_and_records_nothing(tmp_path):
    problem = tmp_path / "bad_inputs"
    shutil.copytree(SCALE, problem)
    reference = problem / "reference.py"
    reference.write_text(reference.read_text().replace("def get_inputs(B, N, **_):", "def get_inputs(B, M):")
                         .replace("torch.randn(B, N)", "torch.randn(B, M)"))
    db = tmp_path / "r.db"
    proc = rooftop("eval", str(problem), str(FIXTURES / "solutions/good.py"), "--db", str(db))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "reference.py" in line and "get_inputs" in line and "shape" in line
    if db.exists():
        assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] == 0


def test_one_shape_by_name():
    v = run("scale", "good.py", shapes="odd", timing=False)
    assert v.status.value == "correct" and [s.shape for s in v.shapes] == ["odd"]
    two = run("scale", "good.py", shapes="tiny,small", timing=False)
    assert [s.shape for s in two.shapes] == ["tiny", "small"]


def test_an_unknown_shape_name_is_a_usage_error_listing_the_names(tmp_path):
    proc = rooftop("eval", str(SCALE), str(FIXTURES / "solutions/good.py"), "--shapes", "tiny,nope",
                   "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "nope" in line and "small, odd, tiny" in line


def test_a_missing_model_new_lists_the_classes_found(tmp_path):
    solution = tmp_path / "misnamed.py"
    solution.write_text((FIXTURES / "solutions/good.py").read_text().replace("class ModelNew", "class MyModel"))
    v = run("scale", solution)
    assert v.status.value == "init_error"
    assert "no ModelNew" in v.messages[0] and "MyModel" in v.messages[0]


def test_a_file_with_only_class_model_is_not_a_solution(tmp_path):
    """A KernelBench user expects an error naming ModelNew, not a reference judged `correct`."""
    solution = tmp_path / "only_model.py"
    solution.write_text((FIXTURES / "solutions/good.py").read_text().replace("class ModelNew", "class Model"))
    v = run("scale", solution)
    assert v.status.value == "init_error" and "no ModelNew" in v.messages[0]
    assert "ModelNew = Model" in v.messages[0]


def test_the_runner_emits_structured_events_in_order():
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    events = []
    verdict = evaluate(fixture_problem("scale"), load_solution(FIXTURES / "solutions/good.py"),
                       Settings(device="cpu"), events=events.append)
    kinds = [e.kind for e in events]
    assert kinds[0] == "evaluation_started" and kinds[-1] == "evaluation_finished"
    started = [e.gate.value for e in events if e.kind == "gate_started"]
    finished = [(e.gate.value, e.ok) for e in events if e.kind == "gate_finished"]
    assert started == ["static", "build", "load", "correctness", "timing", "score"]
    assert finished == [(g, True) for g in started]
    [timed] = [e for e in events if e.kind == "shape_done" and e.gate.value == "timing"]
    assert timed.shape == "tiny" and timed.samples == verdict.shapes[0].candidate.n
    assert events[-1].status == verdict.status
    json.loads(events[0].model_dump_json())  # events cross process boundaries as JSON


def test_a_failed_gate_is_reported_with_its_status():
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    events = []
    evaluate(fixture_problem("scale"), load_solution(FIXTURES / "solutions/wrong.py"), Settings(device="cpu"),
             events=events.append)
    [failed] = [e for e in events if e.kind == "gate_finished" and not e.ok]
    assert failed.gate.value == "correctness" and failed.status.value == "incorrect"


def test_cancelling_stops_between_calls_and_leaves_no_verdict():
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.pipeline.trusted.context import Cancelled
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    cancel = threading.Event()

    def on_event(event):
        if event.kind == "gate_started" and event.gate.value == "correctness":
            cancel.set()

    with pytest.raises(Cancelled):
        evaluate(fixture_problem("scale"), load_solution(FIXTURES / "solutions/good.py"), Settings(device="cpu"),
                 events=on_event, cancel=cancel)


@pytest.mark.quiet
def test_a_contended_shape_is_left_out_of_the_summary_and_leaves_the_speedup_unmeasured():
    from rooftop.pipeline.trusted.scoring import summarize
    from rooftop.score.reward import compute_reward

    v = run("scale", "good.py", shapes="tiny,small")
    assert v.status.value == "correct"
    quiet, busy = v.shapes
    quiet.flags = []  # the quiet one by construction (this suite's other worker may have flagged it)
    busy.speedup = 25.0  # what a busy neighbour made of the reference
    busy.flags.append("contention")
    summarize(v)
    assert v.summary.geomean_speedup == pytest.approx(quiet.speedup)
    # the quiet shape's speedup alone would flatter a kernel slow on the busy one: none counts
    assert compute_reward(v) == -1.0 and compute_reward(v, "kevin") == pytest.approx(0.3)


@pytest.mark.quiet
@pytest.mark.slow
def test_busy_neighbours_during_cpu_timing_are_flagged_not_rewarded():
    """Every core busy with another process while timing: the timing is taken again, then flagged,
    and the verdict's speedup and reward do not come from it."""
    import os
    import signal

    # neighbours outside this process tree (the load probe counts the evaluator's own descendants
    # as its own work): each is started through a shell that exits at once, and spins for 60 s
    spin = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"
    pids = [int(subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!', spin],
                               capture_output=True, text=True).stdout) for _ in range(os.cpu_count() or 2)]
    try:
        v = run("scale", "good.py")
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert v.status.value == "correct"
    [shape] = v.shapes
    assert "contention" in shape.flags
    assert any(w.startswith("[contention]") for w in v.warnings)
    assert v.summary.geomean_speedup is None and v.reward == -1.0  # the least a correct kernel gets


def test_the_command_adapter_s_cli_form_is_checked_before_anything_runs(tmp_path):
    """`--adapter command` with no command line: a usage error naming the flags to use (not a
    config key), exit 2, nothing recorded; `--executable X --arg Y` is the program and what
    follows it; the flags say what they are."""
    from rooftop.agents.runner import AgentConfig

    db = tmp_path / "r.db"
    proc = rooftop("agent", "run", "examples/softmax", "--adapter", "command", "--db", str(db),
                   "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "--executable" in line and "--arg" in line and "`args`" in line
    assert not db.exists() and not (tmp_path / "runs").exists()
    agent = AgentConfig(adapter="command", executable="my-agent", args=["{prompt_file}"])
    assert agent.args == ["my-agent", "{prompt_file}"] and agent.executable is None
    helped = rooftop("agent", "run", "--help").stdout
    for flag in ("--executable", "--model"):
        described = helped.split(flag, 1)[1].split("\n  -", 1)[0]
        assert len(described.split()) > 3, (flag, described)


def test_a_problem_is_named_one_way_everywhere_and_a_missing_deck_points_at_rooftop_decks(monkeypatch, tmp_path):
    """`problems show softmax` finds examples/softmax as `results --problem softmax` does; a name
    that ends several problems is an error listing them; an imported deck's name that is not
    found says where decks are looked up and how to add one."""
    from rooftop.errors import UserError
    from rooftop.problem.registry import resolve

    monkeypatch.setenv("ROOFTOP_DECKS", str(tmp_path))
    for level in ("level1", "level2"):
        folder = tmp_path / "kb" / level / "relu"
        folder.mkdir(parents=True)
        for name in ("problem.yaml", "reference.py"):
            (folder / name).write_text((FIXTURES / "problems/scale" / name).read_text())
    assert resolve("softmax").name == "examples/softmax" == resolve("examples/softmax").name
    with pytest.raises(UserError, match="names 2 problems of the decks .*kb/level1/relu.*kb/level2/relu"):
        resolve("relu")
    with pytest.raises(UserError, match="ROOFTOP_DECKS") as missing:
        resolve("kernelbench/level1/19_ReLU")
    assert str(tmp_path) in str(missing.value)
    shown = rooftop("problems", "show", "softmax")
    assert shown.returncode == 0 and "examples/softmax" in shown.stdout


def test_settings_are_checked_where_they_enter_the_library_for_every_surface(tmp_path):
    """The CLI, the API, the env, the server and the agents all make `Settings`: what the settings
    alone can tell is refused when they are made, what the machine lacks when they are first used
    (a job for a GPU would otherwise wait for a worker that never comes)."""
    from pydantic import ValidationError

    from rooftop.errors import UserError
    from rooftop.pipeline.evaluate import check_settings
    from rooftop.service.evaluator import Evaluator
    from rooftop.vocabulary import Settings

    for bad in ({"shapes": " , "}, {"reward_fn": "nope"}, {"graphs": True, "device": "cpu"}, {"timeout": 0}):
        with pytest.raises(ValidationError):
            Settings(**bad)
    with pytest.raises(UserError, match="--device cuda: no CUDA GPU"):
        check_settings(Settings(device="cuda"), {"device": "--device"})
    with pytest.raises(UserError, match="graphs: CUDA graphs need a GPU"):
        check_settings(Settings(graphs=True))  # auto is the CPU here
    from rooftop.problem.registry import resolve
    from rooftop.service.jobs import SourceSnapshot

    evaluator = Evaluator(tmp_path / "r.db", "cpu")
    snapshot = SourceSnapshot.from_code((FIXTURES / "solutions/good.py").read_text(), "solution.py")
    with pytest.raises(UserError, match="no CUDA GPU"):
        evaluator.submit(resolve(str(FIXTURES / "problems/scale")), snapshot, Settings(device="cuda"))
    assert evaluator.queue.counts() == {} or sum(evaluator.queue.counts().values()) == 0
