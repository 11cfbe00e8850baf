"""`rooftop batch` is a submission to `run_many` and a printer of its results: the command queues and
works off nothing by itself, so every backend's batch is judged the way demo, selfcheck and
batch-kb judge theirs. In this process (the inline backend), on the CPU, on the smallest shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import FIXTURES
from typer.testing import CliRunner

SCALE = str(FIXTURES / "problems/scale")


def test_batch_goes_through_run_many(tmp_path, monkeypatch):
    import rooftop.service.many as many
    from rooftop.cli.main import app

    folder = tmp_path / "cands"
    folder.mkdir()
    for name in ("a_good.py", "b_wrong.py"):
        shutil.copy(FIXTURES / "solutions" / name.split("_", 1)[1], folder / name)
    calls: list[tuple[list[str], dict[str, object]]] = []
    real = many.run_many

    def recording(submissions, settings, **options):
        calls.append(([Path(s.label).name for s in submissions], options))
        return real(submissions, settings, **options)

    monkeypatch.setattr(many, "run_many", recording)
    args = ["batch", str(folder), "--problem", SCALE, "--device", "cpu", "--shapes", "tiny", "--no-timing",
            "--sandbox", "none", "--backend", "inline", "--db", str(tmp_path / "r.db")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    [(labels, options)] = calls
    assert labels == ["a_good.py", "b_wrong.py"]
    assert options["backend"] == "inline" and options["store"] is not None and not options.get("again")
    assert options["progress"] is not None and options["on_result"] is not None
    lines = [line for line in first.stdout.splitlines() if line.startswith("[")]
    assert sorted(line.split(": ")[1].split()[0] for line in lines) == ["correct", "incorrect"], first.stdout
    assert all(line.startswith(("[1/2] ", "[2/2] ")) for line in lines)
    assert "2 jobs on cpu: 2 done, 0 failed" in first.stdout
    again = CliRunner().invoke(app, [*args, "--json"])  # found judged: no line, the same jobs
    assert again.exit_code == 0 and len(calls) == 2
    jobs = json.loads(again.stdout)
    assert [(Path(j["solution"]).name, j["status"]) for j in jobs] == [("a_good.py", "correct"),
                                                                       ("b_wrong.py", "incorrect")]
