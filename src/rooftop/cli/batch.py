"""`rooftop batch`: many candidates through the job queue, a build pool and one worker per device."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from rooftop.cli.common import (
    DbOpt,
    Device,
    DeviceOpt,
    GraphsOpt,
    JsonOpt,
    Sandbox,
    SandboxOpt,
    SeedOpt,
    ShapesOpt,
    TimeoutOpt,
    TimingOpt,
    err,
    out,
    settings_from_options,
)
from rooftop.errors import UserError

if TYPE_CHECKING:
    from rooftop.service.evaluator import Result
    from rooftop.service.inputs import Submission
    from rooftop.service.jobs import Job, JobState
    from rooftop.service.many import Queued
    from rooftop.service.orchestrator import Slot
    from rooftop.vocabulary import Settings

MAX_ROWS = 60  # a longer batch is summarised per problem and status


def register(app: typer.Typer) -> None:
    app.command("batch")(batch_command)


def batch_command(
    input: Annotated[Path, typer.Argument(metavar="INPUT", help="folder of solutions (with --problem), or a JSONL "
                                          "file of {\"problem\": ..., \"solution\": PATH | \"code\": SOURCE} lines")],
    problem: Annotated[str | None, typer.Option("--problem", metavar="PROBLEM",
                                                help="the problem a folder of solutions solves")] = None,
    device: DeviceOpt = Device.auto,
    shapes: ShapesOpt = "auto",
    timeout: TimeoutOpt = None,
    seed: SeedOpt = None,
    timing: TimingOpt = True,
    sandbox: SandboxOpt = Sandbox.auto,
    graphs: GraphsOpt = False,
    workers: Annotated[int | None, typer.Option("--workers", min=1, metavar="N", help="device workers (default: one "
                                                "per GPU; on a CPU, 1); more than the GPUs take turns on them")] = None,
    builders: Annotated[int | None, typer.Option("--builders", min=1, metavar="N",
                                                 help="build workers (compilers, on cores apart from the device "
                                                 "workers'; default: one per such core, at most 64)")] = None,
    backend: Annotated[str, typer.Option("--backend", metavar="local|ray|inline",
                                         help="local: processes on this machine; ray: a Ray cluster; inline: "
                                         "one evaluation after another in this process")] = "local",
    address: Annotated[str | None, typer.Option("--address", metavar="ADDR",
                                                help="the Ray cluster to join (default: start one here)")] = None,
    json_output: JsonOpt = False,
    db: DbOpt = Path("rooftop.db"),
) -> None:
    """Evaluate many candidates: queue them in the results database and work them off. Run it
    again after an interruption and it finishes what is left (nothing is judged twice)."""
    from rooftop.service.batch import BACKENDS

    if backend not in BACKENDS:
        raise UserError(f"--backend: expected one of {', '.join(BACKENDS.names())} (got '{backend}')")
    from rooftop.integrity.sandbox import require_isolation
    from rooftop.service.inputs import read_input

    submissions = read_input(input, problem)
    settings = settings_from_options(device, shapes, timeout, seed, timing, sandbox, graphs)
    require_isolation(settings.sandbox, "rooftop batch")
    failed = _work_off(db, submissions, settings, json_output,
                       {"workers": workers, "builders": builders, "backend": backend, "address": address})
    if failed:
        raise typer.Exit(1)


def _work_off(db: Path, submissions: list[Submission], settings: Settings, json_output: bool,
              backend: dict[str, Any]) -> int:
    """The submissions judged through `run_many` (`backend`: its backend and that backend's
    options), with a line per verdict and a bar; then the summary or the JSON. How many jobs failed."""
    from rooftop.cli.batch_lines import JobLines
    from rooftop.cli.progress import verdict_lines
    from rooftop.service.many import run_many
    from rooftop.store.db import Store

    store = Store(db)
    try:
        lines = JobLines(verdict_lines(not json_output, total=0))  # before the bar takes stdout over
        started = time.monotonic()
        shown = _BatchProgress(not json_output)
        queued: list[Queued] = []  # the batch as run_many queued it

        def seen(batch: Queued) -> None:
            queued.append(batch)
            lines.expect(batch)
            shown.expect(batch)

        with shown:
            results = run_many(submissions, settings, store=store, on_queued=seen, on_result=lines.finished,
                               progress=shown.update, **backend)
        jobs = list({result.job.id: result.job for result in results}.values())  # a job once, in order
        if json_output:
            sys.stdout.write(json.dumps([_job_document(j) for j in jobs], indent=2) + "\n")
        else:
            _print_summary(results, jobs, queued[0], time.monotonic() - started, db)
        return sum(1 for j in jobs if j.state.value == "failed")
    finally:
        store.close()


class _BatchProgress:
    """A bar of finished jobs, with how many wait, build, run and are done, and an ETA."""

    def __init__(self, enabled: bool) -> None:
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), TextColumn("eta"),
                            TimeRemainingColumn(), console=err, transient=True, disable=not enabled)
        self.task = self.bar.add_task("queueing", total=None)

    def expect(self, queued: Queued) -> None:
        self.bar.update(self.task, total=len(set(queued.ids)), description="starting workers")

    def __enter__(self) -> _BatchProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def update(self, counts: dict[JobState, int], slots: list[Slot]) -> None:
        from rooftop.service.jobs import JobState

        finished = counts[JobState.done] + counts[JobState.failed]
        timing = sum(1 for s in slots if s.role == "device" and s.jobs and s.stage == "timing")
        text = (f"queued {counts[JobState.queued] + counts[JobState.built]} · building {counts[JobState.building]} · "
                f"running {counts[JobState.running]} (timing {timing}) · done {counts[JobState.done]}"
                + (f" · failed {counts[JobState.failed]}" if counts[JobState.failed] else ""))
        self.bar.update(self.task, completed=finished, description=text)


def _job_document(job: Job) -> dict[str, object]:
    return {"job": job.id, "problem": job.problem, "solution": job.solution, "state": job.state.value,
            "status": job.status, "evaluation_id": job.evaluation_id, "attempts": job.attempts, "device": job.device,
            "build_s": job.build_s, "build_cached": job.build_cached, "build_wait_s": job.build_wait_s,
            "run_wait_s": job.run_wait_s, "error": job.error}


def _print_summary(results: list[Result], jobs: list[Job], queued: Queued, wall: float, db: Path) -> None:
    from rooftop.cli.render import summary_table

    verdicts = {r.job.id: r.verdict for r in results if r.verdict is not None}
    if len(jobs) <= MAX_ROWS:
        rows = [(j.problem, Path(j.solution).name if "/" in j.solution else j.solution, verdicts[j.id], None)
                for j in jobs if j.id in verdicts]
        if rows:
            out.print(summary_table(rows))
    else:
        out.print(_grouped_table(jobs))
    for job in jobs:
        if job.state.value == "failed":
            out.print(f"[red]{job.problem} {job.solution}[/red]: no verdict: {job.error}", soft_wrap=True)
    done = sum(1 for j in jobs if j.state.value == "done")
    old, tally = len(jobs) - queued.new, queued.tally
    line = f"{len(jobs)} jobs on {queued.device}: {done} done, {len(jobs) - done} failed" + \
        (f" ({old} were already queued or judged)" if old else "") + f", in {wall:.1f} s"
    if tally.built:
        waits = sorted(tally.build_wait)
        line += (f"; build cache {tally.build_cached}/{tally.built} hits, {tally.build_seconds:.1f} s building"
                 + (f", build-queue wait median {waits[len(waits) // 2]:.1f} s" if waits else ""))
    if tally.replaced or tally.recycled:
        line += f"; workers replaced {tally.replaced}, recycled {tally.recycled}"
    out.print(line + f"; recorded in {db}")


def _grouped_table(jobs: list[Job]) -> Table:
    table = Table(title="rooftop batch", header_style="bold")
    for col in ("problem", "status", "jobs"):
        table.add_column(col, justify="right" if col == "jobs" else "left")
    counts: dict[tuple[str, str], int] = {}
    for job in jobs:
        key = (job.problem, job.status or job.state.value)
        counts[key] = counts.get(key, 0) + 1
    for (problem, status), n in sorted(counts.items()):
        table.add_row(problem, status, str(n))
    return table
