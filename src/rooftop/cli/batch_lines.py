"""`rooftop batch`'s line per finished job on a pipe (cli/progress.py's VerdictLines, as `demo`,
`selfcheck` and `batch-kb` write them): `run_many` tells the command each job's result as soon as
it is recorded, and the line is written then. Jobs found judged before the batch get none."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rooftop.cli.progress import NOTE_LIMIT, VerdictLines, outcome_note
from rooftop.errors import on_one_line

if TYPE_CHECKING:
    from rooftop.service.evaluator import Result
    from rooftop.service.jobs import Job
    from rooftop.service.many import Queued


class JobLines:
    """A line for each job of the batch this run judges, once, as its result comes in."""

    def __init__(self, lines: VerdictLines) -> None:
        self.lines = lines
        self._told: set[str] = set()  # jobs with a line, or found judged (no line)

    def expect(self, queued: Queued) -> None:
        """The batch is queued: count the jobs left to judge, and pass over those found judged."""
        self._told = set(queued.over)
        self.lines.total = len(set(queued.ids)) - len(queued.over)

    def finished(self, index: int, result: Result) -> None:
        """`run_many`'s `on_result`: a submission's result (the same job twice gets one line)."""
        job = result.job
        if job.id in self._told:
            return
        self._told.add(job.id)
        if result.verdict is not None:
            verdict = result.verdict
            reason = verdict.messages[0] if verdict.messages else ""
            self.lines.finished(job_name(job), verdict.status.value,
                                outcome_note(verdict.summary.geomean_speedup, reason), verdict.wall_seconds)
        else:
            self.lines.finished(job_name(job), "failed", f"no verdict: {on_one_line(result.error or '', NOTE_LIMIT)}")


def job_name(job: Job) -> str:
    """The problem and the solution's file name (or the name a JSONL line gave its code)."""
    return f"{job.problem}/{Path(job.solution).name if '/' in job.solution else job.solution}"
