"""`rooftop batch`, `selfcheck` and `batch-kb` with their output piped (a CI log, `| tee`, `> file`):
a line per finished job as each finishes, as `demo` prints (test_demo_piped.py), not silence
until the final table. (With --json stdout holds the document alone: test_service.py and
test_kernelbench.py parse it.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES


def _piped(*args: str, cwd: Path) -> tuple[list[str], str, str, int]:
    """The command run with stdout and stderr piped: its stdout lines up to the first that is not a
    job's, everything after, its stderr and exit status. Asserts that the first job's line was
    read while the command still ran (flushed as the job ended, not with the table)."""
    proc = subprocess.Popen([sys.executable, "-m", "rooftop", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env={**os.environ, "COLUMNS": "200"})
    assert proc.stdout is not None
    first = proc.stdout.readline()
    still_running = proc.poll() is None
    rest, stderr = proc.communicate(timeout=300)
    assert still_running, f"the first line came only as the run ended: {first!r}"
    lines = [first, *rest.splitlines(keepends=True)]
    jobs = [line.rstrip("\n") for line in lines if line.startswith("[")]
    assert lines[:len(jobs)] == [line + "\n" for line in jobs], "a job's line came after the table"
    return jobs, "".join(lines[len(jobs):]), stderr, proc.returncode


def _matches(lines: list[str], patterns: list[str]) -> None:
    """Each line matches one pattern (in any order: jobs of a batch end in no fixed order), counted
    [1/n] to [n/n] in the order they were printed."""
    assert len(lines) == len(patterns), lines
    for index, line in enumerate(lines, 1):
        assert line.startswith(f"[{index}/{len(patterns)}] "), line
    left = list(patterns)
    for line in lines:
        found = next((p for p in left if re.fullmatch(rf"\[\d+/\d+\] {p}", line)), None)
        assert found is not None, f"{line!r} matches none of {left}"
        left.remove(found)


def test_piped_batch_prints_each_job_as_it_ends(tmp_path):
    folder = tmp_path / "cands"
    folder.mkdir()
    # the refused one ends in milliseconds, first: the good one is still being judged
    for ours, fixture in (("a_forbidden.py", "forbidden.py"), ("b_good.py", "good.py"), ("c_wrong.py", "wrong.py")):
        shutil.copy(FIXTURES / "solutions" / fixture, folder / ours)
    scale = FIXTURES / "problems" / "scale"
    args = ["batch", str(folder), "--problem", str(scale), "--device", "cpu", "--workers", "1", "--builders", "1",
            "--no-timing", "--db", str(tmp_path / "r.db")]
    jobs, rest, stderr, code = _piped(*args, cwd=tmp_path)
    assert code == 0, stderr
    name = re.escape(str(scale))
    _matches(jobs, [rf"{name}/a_forbidden\.py: rejected \(.*'torch\.mul' is forbidden.*\) in \d+\.\d s",
                    rf"{name}/b_good\.py: correct in \d+\.\d s",  # untimed: no speedup to show
                    rf"{name}/c_wrong\.py: incorrect \(shape 'tiny'.*\) in \d+\.\d s"])
    assert "3 jobs on cpu: 3 done" in rest and "b_good.py" in rest  # the table and summary follow
    # run again: nothing is left to judge, so no job's line
    again = subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True, cwd=tmp_path,
                           timeout=300)
    assert again.returncode == 0 and "3 were already queued or judged" in again.stdout, again.stderr
    assert not again.stdout.startswith("[")


def test_piped_selfcheck_prints_each_problem_as_it_is_checked(tmp_path):
    deck = tmp_path / "deck"
    for name in ("broken_reference", "scale"):
        shutil.copytree(FIXTURES / "problems" / name, deck / name)
    jobs, rest, stderr, code = _piped("selfcheck", str(deck), "--device", "cpu", cwd=tmp_path)
    assert code == 1, stderr  # the broken reference fails its check
    folder = re.escape(str(deck))
    _matches(jobs, [rf"{folder}/broken_reference: \w+ \(fail: .*the problem author made a mistake.*\) in \d+\.\d s",
                    rf"{folder}/scale: correct \(pass unchecked(, speedup \d+\.\d+x)?\) in \d+\.\d s"])
    assert "1 of 2 pass" in rest
    assert f"{deck}/scale: correctness" in stderr  # stderr keeps its line per gate


def test_piped_batch_kb_prints_each_generation_as_it_is_judged(tmp_path):
    kb = tmp_path / "kb" / "KernelBench" / "level1"
    kb.mkdir(parents=True)
    shutil.copy(FIXTURES / "kernelbench_relu.py", kb / "19_ReLU.py")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(FIXTURES / "solutions" / "relu_new.py", run / "level_1_problem_19_sample_0_kernel.py")
    (run / "level_1_problem_19_sample_1_kernel.py").write_text(
        (FIXTURES / "solutions" / "relu_new.py").read_text().replace("clamp_min(0)", "clamp_min(0.5)"))
    (run / "level_1_problem_77_sample_0_kernel.py").write_text("import torch\n")
    jobs, rest, stderr, code = _piped("batch-kb", str(run), "--kernelbench", str(tmp_path / "kb"), "--device", "cpu",
                                      "--db", str(tmp_path / "r.db"), cwd=tmp_path)
    assert code == 0, stderr
    # a speedup, or why there is none (a timing flagged when other tests share the machine)
    _matches(jobs, [r"kernelbench/level1/19_ReLU sample 0: correct \((speedup \d+\.\d{3}x|no trusted timing .*)\) "
                    r"in \d+\.\d s",
                    r"kernelbench/level1/19_ReLU sample 1: incorrect \(shape 'smoke'.*\) in \d+\.\d s",
                    r"level_1_problem_77_sample_0_kernel\.py: unknown_problem \(no problem 77 in level 1 .*\) "
                    r"in \d+\.\d s"])
    assert jobs[0].startswith("[1/3] kernelbench/level1/19_ReLU sample 0")  # in the order judged
    assert "KernelBench figures over 3 generations" in rest
