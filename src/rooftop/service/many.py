"""`run_many`: many evaluations through the job queue and one backend, a result per submission.

The one way to run many evaluations and wait for all of them: the in-process commands (demo,
selfcheck, batch-kb) with the inline backend, `rooftop batch` with worker processes, Ray or the
inline backend. The jobs are in the store like any batch's, so their verdicts are recorded as the
orchestrator's always are; a caller without a store gets a temporary one. (service/batch.py
queues the jobs and makes a backend's orchestrator; the `Evaluator` behind the env and the server
uses those parts for jobs that come one at a time.)
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rooftop.service.batch import no_cluster, orchestrator_for, submit
from rooftop.service.evaluator import Result, result_of
from rooftop.service.inputs import Submission
from rooftop.service.jobs import FINAL, JobState, problem_hash
from rooftop.service.orchestrator import Orchestrator, ProgressFn, Slot, Tally
from rooftop.service.queue import JobQueue
from rooftop.store.db import Store
from rooftop.vocabulary import DeviceType, EventSink, Settings

StartFn = Callable[[int], EventSink]  # submission index -> the sink for its evaluation's events
ResultFn = Callable[[int, Result], None]  # told each submission's result as soon as it is recorded


@dataclass
class Queued:
    """The batch as `run_many` queued it, for a caller that reports on it as a whole (`on_queued`)."""

    device: DeviceType
    ids: list[str]  # a job per submission, in order (the same work twice is the same job)
    new: int  # how many of them were not in the store before
    over: frozenset[str]  # those already done or failed when queued: found, not judged again
    tally: Tally = field(default_factory=Tally)  # what the backend did; complete once run_many returns


QueuedFn = Callable[[Queued], None]


def run_many(submissions: Sequence[Submission], settings: Settings, *, backend: str = "inline",
             store: Store | None = None, again: bool = False, on_start: StartFn | None = None,
             on_result: ResultFn | None = None, progress: ProgressFn | None = None, ahead: bool = True,
             workers: int | None = None, builders: int | None = None, address: str | None = None,
             on_queued: QueuedFn | None = None) -> list[Result]:
    """One result per submission, in order. Jobs already judged with the same work are found, not
    judged again, unless `again`. `on_queued` is told the batch once it is queued, before any job
    is worked off; `on_start` (the inline backend only: its evaluations run in this process) names
    the sink of each evaluation's events as it begins; `on_result` hears of each result once
    recorded (those found judged first); `progress` sees the jobs' counts and the workers as they
    change; `ahead` False: the inline backend starts no child ahead on a GPU (the caller does).
    `workers`, `builders` and `address`: the backend's (service/batch.py, `orchestrator_for`).
    Settings this machine cannot honour are refused at once (UserError)."""
    from rooftop.pipeline.evaluate import check_settings

    device = check_settings(settings)
    if backend == "inline":
        no_cluster(address)
    with _opened(store) as opened:
        queue = JobQueue(opened)
        ids, new = submit(queue, submissions, settings, again=again, prebuild=backend != "inline")
        queued = Queued(device, ids, new, frozenset(job.id for job in queue.jobs(ids) if job.state in FINAL))
        if on_queued is not None:
            on_queued(queued)
        feed = ResultFeed(queue, ids, on_result)
        if backend == "inline":
            orchestrator = _inline(queue, device, submissions, ids, on_start, feed, ahead)
        else:
            orchestrator = orchestrator_for(queue, device, workers=workers, builders=builders, backend=backend,
                                            address=address)
        queued.tally = orchestrator.run(ids, feed.watching(progress))
        feed.report()
        return feed.results()


def _inline(queue: JobQueue, device: DeviceType, submissions: Sequence[Submission], ids: list[str],
            on_start: StartFn | None, feed: ResultFeed, ahead: bool) -> Orchestrator:
    """The inline orchestrator, given the submissions' problems as they are in memory."""
    from rooftop.service.inline import InlineTransport, inline_orchestrator

    first: dict[str, int] = {}
    for index, ident in enumerate(ids):
        first.setdefault(ident, index)
    sinks = None if on_start is None else (lambda ident: on_start(first[ident]))
    problems = {problem_hash(item.problem): item.problem for item in submissions}
    orchestrator = inline_orchestrator(queue, device, sinks, problems, ahead)
    assert isinstance(orchestrator.transport, InlineTransport)
    feed.answered = orchestrator.transport.finished
    return orchestrator


@contextlib.contextmanager
def _opened(store: Store | None) -> Iterator[Store]:
    if store is not None:
        yield store
        return
    with tempfile.TemporaryDirectory(prefix="rooftop-many-") as folder:
        temporary = Store(Path(folder) / "rooftop.db")
        try:
            yield temporary
        finally:
            temporary.close()


class ResultFeed:
    """Each submission's result, told to `on_result` as soon as its job is recorded: after every
    job the inline transport answered (`answered`), else whenever the batch's count of finished
    jobs grows."""

    def __init__(self, queue: JobQueue, ids: list[str], on_result: ResultFn | None) -> None:
        self.queue, self.ids, self.on_result = queue, ids, on_result
        self.answered: list[str] | None = None
        self._waiting: dict[str, list[int]] = {}  # job id -> submission indices not yet told
        for index, ident in enumerate(ids):
            self._waiting.setdefault(ident, []).append(index)
        self._finished = 0

    def watching(self, then: ProgressFn | None) -> ProgressFn:
        def seen(counts: dict[JobState, int], slots: list[Slot]) -> None:
            finished = counts[JobState.done] + counts[JobState.failed]
            if self.on_result is not None and (self.answered or finished > self._finished):
                self.report()
            self._finished = finished
            if then is not None:
                then(counts, slots)

        return seen

    def report(self) -> None:
        """Tell `on_result` of every job of the batch recorded since the last time."""
        if self.answered:
            self.answered.clear()
        if self.on_result is None or not self._waiting:
            return
        for job in self.queue.jobs(list(self._waiting)):
            result = result_of(self.queue, job)
            if result is not None:
                for index in self._waiting.pop(job.id):
                    self.on_result(index, result)

    def results(self) -> list[Result]:
        by_id = {job.id: result_of(self.queue, job) for job in self.queue.jobs(self.ids)}
        missing = [ident for ident in self.ids if by_id.get(ident) is None]
        if missing:
            raise RuntimeError(f"{len(missing)} job(s) of the batch ended without a result, e.g. {missing[0]}")
        return [result for ident in self.ids if (result := by_id[ident]) is not None]
