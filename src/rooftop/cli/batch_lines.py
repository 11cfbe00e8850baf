"""`rooftop batch`'s line per finished job on a pipe (cli/progress.py's VerdictLines, as `demo`,
`selfcheck` and `batch-kb` write them): the orchestrator records every job's end through its
queue's `finish` or `fail`, so the batch's queue writes the line there, as the job ends."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rooftop.cli.progress import NOTE_LIMIT, VerdictLines, outcome_note
from rooftop.errors import on_one_line
from rooftop.service.jobs import Job, JobState
from rooftop.service.queue import JobQueue
from rooftop.store.db import Store
from rooftop.verdict import Verdict


class ReportingQueue(JobQueue):
    """A job queue that writes a line for each watched job as it ends, done or failed."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._lines, self._watched = VerdictLines(None, 0), set[str]()

    def watch(self, ids: Iterable[str], lines: VerdictLines) -> None:
        self._lines, self._watched = lines, set(ids)

    def finish(self, ident: str, verdict: Verdict, held: JobState = JobState.running) -> int | None:
        evaluation_id = super().finish(ident, verdict, held)
        if evaluation_id is not None and (name := self._ended(ident)) is not None:
            reason = verdict.messages[0] if verdict.messages else ""
            self._lines.finished(name, verdict.status.value, outcome_note(verdict.summary.geomean_speedup, reason),
                                 verdict.wall_seconds)
        return evaluation_id

    def fail(self, ident: str, error: str) -> None:
        super().fail(ident, error)
        if (name := self._ended(ident)) is not None:
            self._lines.finished(name, "failed", f"no verdict: {on_one_line(error, NOTE_LIMIT)}")

    def _ended(self, ident: str) -> str | None:
        """The name for a watched job's line, once (None: not watched, or no line is shown)."""
        if ident not in self._watched:
            return None
        self._watched.discard(ident)
        job = self.get(ident) if self._lines.shown else None
        return job_name(job) if job is not None else None


def job_name(job: Job) -> str:
    """The problem and the solution's file name (or the name a JSONL line gave its code)."""
    return f"{job.problem}/{Path(job.solution).name if '/' in job.solution else job.solution}"
