"""benchmarks/deck_numbers.py as a user runs it: rendering saved runs, and refusing bad arguments."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "deck_numbers.py"
ENV = {"device": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0", "date": "2026-11-21"}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def _row(shape: str, kind: str, seconds: float | None, fraction: float | None, error: str = "") -> dict:
    return {"problem": "hard/p", "shape": shape, "split": "visible", "kind": kind, "seconds": seconds,
            "fraction": fraction, "error": error}


def test_merge_shows_the_best_solution_and_its_speedups(tmp_path: Path) -> None:
    baselines = [_row("a", "eager", 4e-3, 0.1), _row("b", "eager", 9e-3, 0.1),
                 _row("a", "sota", 1e-3, 0.4), _row("b", "sota", 1e-3, 0.9)]
    ours = [_row("a", "ours:triton_slow", 2e-3, 0.2), _row("b", "ours:triton_slow", 3e-3, 0.3),
            # faster, but wrong on one shape: the solution correct on more shapes is shown
            _row("a", "ours:triton_fast", 1e-4, 4.0), _row("b", "ours:triton_fast", None, None, "incorrect: b"),
            _row("a", "ours:triton_mid", 1e-3, 0.4), _row("b", "ours:triton_mid", 1e-3, 0.9)]
    (tmp_path / "base.json").write_text(json.dumps({"environment": ENV, "rows": baselines}))
    (tmp_path / "ours.json").write_text(json.dumps({"environment": ENV, "rows": ours}))
    done = _run("--merge", str(tmp_path / "base.json"), str(tmp_path / "ours.json"), "--per-shape",
                "--markdown", str(tmp_path / "out.md"))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("| p |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # eager, sota, ours (geomean of 0.4 and 0.9 = 0.6), vs eager (4x and 9x: 6x), vs best (1x), name
    assert cells == ["p", "0.100", "0.600", "0.600", "6.00x", "1.00x", "triton_mid"]
    assert "| p | b | visible | 9,000.0 µs (0.100) | 1,000.0 µs (0.900) | 1,000.0 µs (0.900) |" in text


def test_unknown_shape_is_refused_before_anything_runs() -> None:
    done = _run("--problems", "kda_chunk", "--shapes", "ragged_tail,no_such_shape", "--no-solutions")
    assert done.returncode == 2
    assert "--shapes: no shape named no_such_shape in hard/kda_chunk" in done.stderr
    assert "Traceback" not in done.stderr
