"""The `rooftop` command behaves like a well-mannered command-line tool: -h, --version, readable
help, output that fits the terminal, machine-readable errors, quick answers to mistyped paths."""

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest
from conftest import FIXTURES

SCALE = str(FIXTURES / "problems/scale")
GOOD = str(FIXTURES / "solutions/good.py")
COMMANDS = [[], ["eval"], ["demo"], ["baselines"], ["calibrate"], ["problems"], ["problems", "show"], ["prompt"],
            ["import", "kernelbench-hard"]]


def rooftop(*args, columns: str | None = "100"):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "rooftop")
def test_short_help_flag_is_the_long_one(command):
    short, long = rooftop(*command, "-h"), rooftop(*command, "--help")
    assert short.returncode == 0 and long.returncode == 0, short.stderr
    assert short.stdout == long.stdout
    assert short.stdout.startswith(f"Usage: {' '.join(['rooftop', *command])} ")
    assert "-h, --help" in short.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "rooftop")
def test_help_shows_no_type_noise(command):
    text = rooftop(*command, "-h").stdout
    assert "<bool>" not in text
    options = [line for line in text.splitlines() if line.lstrip().startswith("-")]
    assert options and not any("<str>" in line or "<path>" in line for line in options)


def test_flags_are_bare_and_choices_are_listed():
    options = {line.split()[0]: line for line in rooftop("eval", "-h").stdout.splitlines()
               if line.lstrip().startswith("--")}
    assert options["--device"].split()[1] == "<auto|cpu|cuda>"
    assert options["--sandbox"].split()[1] == "<auto|bwrap|none>"
    assert options["--timing"].split()[:3] == ["--timing", "/", "--no-timing"]
    assert options["--timing"].split()[3] == "time"
    assert options["--json"].split()[1] == "print" and options["--graphs"].split()[1] == "time"
    assert options["--shapes"].split()[1] == "GROUP|NAME[,NAME]"
    baselines = rooftop("baselines", "-h").stdout
    assert "--compile-mode <default|max-autotune>" in baselines and "--kinds KIND[,KIND]" in baselines
    assert "eager, compile, sota" in " ".join(baselines.split())


def test_version():
    proc = rooftop("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"rooftop {metadata.version('rooftop')}\n"


def test_bare_command_prints_the_help():
    proc = rooftop()
    assert proc.returncode == 2 and proc.stdout.startswith("Usage: rooftop ") and "eval" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("args", [("problems",), ("problems", "show", "examples/softmax")])
def test_tables_fit_columns(args):
    proc = rooftop(*args, columns="80")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) > 5 and max(len(line) for line in lines) <= 80
    assert "examples/softmax" in proc.stdout


def test_output_to_a_file_without_columns_stays_wide():
    proc = rooftop("problems", "show", "examples/softmax", columns=None)
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) > 80


@pytest.mark.slow
def test_no_timing_is_shown_as_not_timed(tmp_path):
    proc = rooftop("eval", SCALE, GOOD, "--no-timing", "--device", "cpu", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 0, proc.stderr
    assert "correct" in proc.stdout and "not timed" in proc.stdout
    assert "+0.000" not in proc.stdout


def test_untimed_correct_verdict_renders_without_a_reward():
    from rich.console import Console

    from rooftop.cli.render import print_verdict, summary_table
    from rooftop.verdict import ShapeResult, Status, Verdict

    shapes = [ShapeResult(shape="tiny", split="smoke", params={"n": 4}, correct=True)]
    verdict = Verdict(status=Status.correct, reward=0.0, problem="scale", problem_version=1, solution="good.py",
                      source_hash="0", shapes=shapes)
    console = Console(width=120, record=True)
    print_verdict(verdict, console)
    console.print(summary_table([("scale", "good.py", verdict, None)]))
    text = console.export_text()
    assert text.splitlines()[0].startswith("correct  not timed") and "+0.0" not in text
    assert text.count("not timed") == 3  # the verdict line, and the table's reward and speedup
    wrong = verdict.model_copy(update={"status": Status.incorrect})
    console = Console(width=120, record=True)
    print_verdict(wrong, console)
    assert "not timed" not in console.export_text()


@pytest.mark.parametrize("args,needle", [
    (["eval", "no/such/problem", GOOD], "no/such/problem"),
    (["eval", SCALE, GOOD, "--device", "tpu"], "--device"),
    (["baselines", SCALE, "--kinds", "eager,fast"], "--kinds"),
])
def test_json_errors_are_a_json_document(args, needle, tmp_path):
    proc = rooftop(*args, "--json", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)  # stdout holds only the document
    assert set(doc) == {"error", "exit_code"} and doc["exit_code"] == 2 and needle in doc["error"]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and doc["error"] in lines[0] and "Traceback" not in proc.stderr


def test_errors_without_json_leave_stdout_empty(tmp_path):
    proc = rooftop("eval", "no/such/problem", GOOD, "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and proc.stdout == ""


@pytest.mark.parametrize("args,needle", [
    (["eval", "no/such/problem", "x.py"], "no/such/problem"),
    (["eval", SCALE, "missing_solution.py"], "missing_solution.py"),
    (["eval", str(FIXTURES / "problems"), GOOD], "problem.yaml"),
    (["eval", SCALE, GOOD, "--device", "tpu"], "--device"),
    (["baselines", "no/such/problem"], "no/such/problem"),
    (["baselines", SCALE, "--compile-mode", "fast"], "--compile-mode"),
])
def test_input_errors_are_answered_before_heavy_imports(args, needle, tmp_path):
    """Importing torch alone takes over a second; these answers need only the argument parser and
    the problem and solution loaders. What is asserted is that torch was never imported, not a
    time, which a busy machine stretches."""
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: sys.stderr.write('torch imported: %s\\n' % ('torch' in sys.modules)))\n"
             f"sys.argv = ['rooftop', *{[*args, '--db', str(tmp_path / 'r.db')]!r}]\n"
             "from rooftop.cli.entry import main\nmain()\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "100"})
    assert proc.returncode == 2 and needle in proc.stderr
    assert "torch imported: False" in proc.stderr, proc.stderr
    assert "Value error" not in proc.stderr and "Traceback" not in proc.stderr


def _gpu_shape(name: str, ratio: float, **fields):
    from rooftop.measure.measurement import TimingStats
    from rooftop.verdict import ShapeResult

    reference = [1e-3 * (1 + 1e-3 * (i % 7)) for i in range(60)]
    stats = {"clock": "cuda_event", "sm_clock_mhz": [1980.0] * 60, "stopped_by": "precision"}
    return ShapeResult(shape=name, split="held_out", params={"n": 1}, correct=True,
                       candidate=TimingStats(samples=[r / ratio for r in reference], **stats),
                       reference=TimingStats(samples=reference, **stats), **fields)


def test_the_shape_table_fits_120_columns_and_speaks_in_significant_digits():
    """A GPU verdict with every column there is (the SM clock, a second baseline, estimated
    figures, flags): each row on one line at 120 columns, no cell cut short; a 0.0031x speedup
    is not 0.00x; an elementwise op without a flop count gets no TFLOP/s column, its GB/s stays."""
    from rich.console import Console

    from rooftop.cli.render import shape_table
    from rooftop.pipeline.trusted.scoring import set_speedup
    from rooftop.verdict import Status, Verdict

    shapes = [_gpu_shape("b16_s4096_d128_causal", 0.0031, gbps=1234.6, speedups={"compile": 0.0029},
                         flags=["host-bound"]),
              _gpu_shape("tiny_odd", 1.234, gbps=98.7, speedups={"compile": 1.1}, flags=["contention"])]
    for shape in shapes:
        set_speedup(shape, 0.0025, "default")
    verdict = Verdict(status=Status.correct, reward=0.0, problem="p", problem_version=1, solution="s.py",
                      source_hash="0", shapes=shapes, figures="estimated")
    console = Console(width=120, record=True)
    console.print(shape_table(verdict, console.width))
    lines = console.export_text().splitlines()
    rows = [line for line in lines if line.startswith(("b16_", "tiny_odd"))]
    assert len(rows) == 2 and all(len(line) <= 120 for line in lines), lines
    assert "…" not in "\n".join(rows) and "b16_s4096_d128_causal" in rows[0] and "host-bound" in rows[0]
    assert "0.0031x" in rows[0] and "0.00x" not in rows[0] and "1.23x" in rows[1] and "*" in rows[1]
    assert "TFLOP/s" not in lines[0] and "GB/s" in lines[0] and "1235" in rows[0]
    caption = " ".join(" ".join(lines).split())  # wrapped
    assert "not measured on 'tiny_odd' (machine shared)" in caption and "left out for width: MHz" in caption
