"""`rooftop demo` with its output piped (a CI log, `| tee`): a line per verdict as each finishes,
not silence until the final table."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT


def _mini_deck(root: Path) -> None:
    """One bundled problem with two of its solutions; the expected status of the broken one is
    set wrong on purpose so that the line for a mismatch is seen too."""
    source = ROOT / "problems" / "examples" / "softmax"
    problem = root / "mini" / "softmax"
    (problem / "solutions").mkdir(parents=True)
    for name in ("problem.yaml", "reference.py"):
        shutil.copy(source / name, problem / name)
    for name in ("broken_wrong.py", "pytorch_softmax.py"):
        shutil.copy(source / "solutions" / name, problem / "solutions" / name)
    (problem / "solutions" / "expected.yaml").write_text(
        "broken_wrong.py: {cpu: correct, cuda: correct}\npytorch_softmax.py: {cpu: correct, cuda: correct}\n")


def test_piped_demo_prints_each_verdict_as_it_finishes(tmp_path):
    _mini_deck(tmp_path / "decks")
    env = {**os.environ, "ROOFTOP_PROBLEMS": str(tmp_path / "decks")}
    proc = subprocess.Popen([sys.executable, "-m", "rooftop", "demo", "--deck", "mini", "--device", "cpu",
                             "--db", str(tmp_path / "r.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    assert proc.stdout is not None
    # the first verdict's line is read while the second evaluation still runs: it was flushed
    # when that verdict came, not with the table at the end
    first = proc.stdout.readline()
    still_running = proc.poll() is None
    started = time.monotonic()
    rest, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert re.fullmatch(r"\[1/2\] mini/softmax/broken_wrong\.py: incorrect \(expected correct\) in \d+\.\d s\n", first)
    assert still_running and time.monotonic() - started > 0.2, "the first line came only as the run ended"
    assert re.fullmatch(r"\[2/2\] mini/softmax/pytorch_softmax\.py: correct \(as expected\) in \d+\.\d s",
                        rest.splitlines()[0])
    # the table and the summary follow, as on a terminal
    assert "1 differs from the expected status" in rest
    assert rest.index("pytorch_softmax.py") < rest.index("verdicts on cpu")
    # stderr keeps its line per gate
    assert "mini/softmax/pytorch_softmax.py: timing" in stderr


def test_json_demo_prints_the_document_alone(tmp_path):
    _mini_deck(tmp_path / "decks")
    env = {**os.environ, "ROOFTOP_PROBLEMS": str(tmp_path / "decks")}
    proc = subprocess.run([sys.executable, "-m", "rooftop", "demo", "--deck", "mini", "--device", "cpu",
                           "--json", "--db", str(tmp_path / "r.db")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[\n") and "[1/2]" not in proc.stdout
