"""The orchestrator's own cost per job, as a batch grows: what the one loop that claims jobs,
records verdicts and counts the batch spends per job when its workers cost nothing.

N distinct PyTorch jobs are submitted to a fresh store (the time per submission is reported too);
then one orchestrator works them off with 4 device workers (each holding 3 jobs, as a GPU worker
does) and 40 build workers, through a transport whose workers answer at once: every task gets
four stage messages and a verdict, one message per poll, as they would trickle in from real
workers. What is timed is therefore the store's claims, records and counts and the loop around
them; a real batch adds the evaluations themselves, which overlap with this loop but cannot go
faster than it. A cost per job that grows with N means the loop works in time quadratic in the
batch.

    python benchmarks/orchestrator_overhead.py [--jobs 1000,4000,20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rooftop.problem.loader import load_problem  # noqa: E402
from rooftop.service.jobs import SourceSnapshot  # noqa: E402
from rooftop.service.orchestrator import Orchestrator, Slot  # noqa: E402
from rooftop.service.queue import JobQueue  # noqa: E402
from rooftop.service.worker import Hello, Outcome, Stage, Task  # noqa: E402
from rooftop.store.db import Store  # noqa: E402
from rooftop.verdict import Status, Verdict  # noqa: E402
from rooftop.vocabulary import Settings  # noqa: E402

PROBLEM = ROOT / "tests" / "fixtures" / "problems" / "scale"
SOLUTION = ROOT / "tests" / "fixtures" / "solutions" / "good.py"


class InstantWorkers:
    """A transport whose workers answer every task at once."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Slot, str | None, str]] = []

    def start(self, slot: Slot) -> None:
        self.waiting.append((slot, Hello().model_dump_json(), ""))

    def send(self, slot: Slot, task: Task) -> bool:
        for stage in ("build", "load", "correctness", "timing"):
            self.waiting.append((slot, Stage(job_id=task.job_id, stage=stage).model_dump_json(), ""))
        verdict = Verdict(status=Status.correct, reward=0.0, problem=task.problem, problem_version=1,
                          solution=task.label, source_hash=task.source.source_hash)
        self.waiting.append((slot, Outcome(job_id=task.job_id, verdict=verdict).model_dump_json(), ""))
        return True

    def poll(self, slots: list[Slot], timeout: float) -> list[tuple[Slot, str | None, str]]:
        said, self.waiting = self.waiting[:1], self.waiting[1:]
        return said

    def stop(self, slot: Slot) -> None:
        pass

    def close(self) -> None:
        pass


def measure(jobs: int, folder: Path) -> dict:
    store = Store(folder / f"r{jobs}.db")
    queue = JobQueue(store)
    problem, code = load_problem(PROBLEM), SOLUTION.read_text()
    started = time.perf_counter()
    ids = [queue.submit(problem, SourceSnapshot.from_code(code + f"\n# {i}\n"), Settings(device="cpu"))[0]
           for i in range(jobs)]
    submitted = time.perf_counter() - started
    slots = [Slot(name=f"cuda:{i}", role="device", device="cuda", depth=3) for i in range(4)]
    slots += [Slot(name=f"build:{i}", role="build", device="cuda") for i in range(40)]
    started = time.perf_counter()
    Orchestrator(queue, slots, InstantWorkers()).run(ids)
    worked = time.perf_counter() - started
    done = store.count("evaluations")
    store.close()
    return {"jobs": jobs, "recorded": done, "submit_ms_per_job": 1e3 * submitted / jobs,
            "orchestrator_s": worked, "orchestrator_ms_per_job": 1e3 * worked / jobs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="1000,4000,20000", help="batch sizes, comma-separated")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    try:
        sizes = [int(n) for n in args.jobs.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--jobs {args.jobs}: expected whole numbers, e.g. 1000,4000")
    if not sizes or min(sizes) < 1:
        parser.error(f"--jobs {args.jobs}: expected batch sizes of at least 1")
    rows = []
    with tempfile.TemporaryDirectory(prefix="rooftop-orchestrator-") as folder:
        for jobs in sizes:
            row = measure(jobs, Path(folder))
            rows.append(row)
            print(f"{jobs:>7} jobs: submit {row['submit_ms_per_job']:.2f} ms/job, orchestrator "
                  f"{row['orchestrator_s']:.1f} s = {row['orchestrator_ms_per_job']:.2f} ms/job "
                  f"({row['recorded']} verdicts recorded)", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "python": sys.version.split()[0],
                                         "sqlite": __import__("sqlite3").sqlite_version, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
