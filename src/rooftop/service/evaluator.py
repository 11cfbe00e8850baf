"""The evaluator: queue a candidate and wait for its verdict, with the service running behind.

An orchestrator works off the store's queue in a background thread (its own connection to the
store, its workers started once and kept warm) while any number of callers, threads or asyncio
tasks, queue jobs and wait for them through connections of their own. This is what the RL
environment and the HTTP server stand on: a verdict through a worker that is already up, and a
job that outlives the process that asked for it (it is in the store, with its verdict once made).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel

from rooftop.errors import UserError
from rooftop.problem.spec import Problem
from rooftop.service.batch import orchestrator_for
from rooftop.service.jobs import FINAL, Job, SourceSnapshot
from rooftop.service.orchestrator import Tally
from rooftop.service.queue import JobQueue
from rooftop.store.db import Store
from rooftop.verdict import Verdict
from rooftop.vocabulary import DeviceType, Settings

POLL = 0.05  # seconds between looks at a job that is under way


class Result(BaseModel):
    """A finished job: its verdict, or why none could be made."""

    job: Job
    verdict: Verdict | None = None
    error: str | None = None


def result_of(queue: JobQueue, job: Job) -> Result | None:
    """The job's result once it is done or failed (its verdict as recorded); None before."""
    if job.state not in FINAL:
        return None
    verdict = queue.store.evaluations.verdict(job.evaluation_id) if job.evaluation_id is not None else None
    return Result(job=job, verdict=verdict, error=job.error if verdict is None else None)


class Evaluator:
    def __init__(self, db: str | Path, device: DeviceType, *, workers: int | None = None, builders: int | None = None,
                 backend: str = "local", address: str | None = None, recycle_after: int = 200) -> None:
        self.db, self.device = Path(db), device
        self.workers, self.builders, self.backend, self.address = workers, builders, backend, address
        self.recycle_after = recycle_after
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._local = threading.local()
        self._failure: BaseException | None = None
        self.tally: Tally | None = None

    # -- the service in the background -----------------------------------------------------------
    def start(self) -> Evaluator:
        if self._thread is None:
            Store(self.db).close()  # a bad path is the caller's error, here, not the thread's
            self._thread = threading.Thread(target=self._serve, name="rooftop-orchestrator", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop the workers; jobs still under way go back to the queue for the next service."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        queue = getattr(self._local, "queue", None)
        if queue is not None:
            queue.store.close()
            self._local.queue = None

    def __enter__(self) -> Evaluator:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _serve(self) -> None:
        store = Store(self.db)
        try:
            orchestrator = orchestrator_for(JobQueue(store), self.device, workers=self.workers,
                                            builders=self.builders, backend=self.backend, address=self.address,
                                            recycle_after=self.recycle_after)
            self.tally = orchestrator.serve(self._stop)
        except BaseException as exc:  # noqa: BLE001 - reported to every waiter instead of dying unseen
            self._failure = exc
        finally:
            store.close()

    # -- callers ---------------------------------------------------------------------------------
    @property
    def queue(self) -> JobQueue:
        """This thread's own connection to the store (SQLite connections stay in their thread)."""
        queue = getattr(self._local, "queue", None)
        if queue is None:
            queue = self._local.queue = JobQueue(Store(self.db))
        return queue

    def submit(self, problem: Problem, source: SourceSnapshot, settings: Settings, label: str | None = None) -> str:
        """The job's id; the same work submitted again names the job already made. Settings this
        machine cannot honour (cuda without a GPU, bwrap without bubblewrap) are refused here, at
        once, rather than left waiting for a worker that never comes."""
        from rooftop.pipeline.evaluate import check_settings

        check_settings(settings)
        return self.queue.submit(problem, source, settings, label=label)[0]

    def poll(self, ident: str) -> Result | None:
        """The finished job, or None while it is under way."""
        job = self.queue.get(ident)
        if job is None:
            raise UserError(f"job {ident}: no such job in {self.db}")
        if job.state not in FINAL and self._failure is not None:
            raise RuntimeError(f"the evaluation service stopped: {self._failure}") from self._failure
        return result_of(self.queue, job)

    def wait(self, ident: str, timeout: float | None = None) -> Result:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (result := self.poll(ident)) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {ident} not finished after {timeout} s")
            time.sleep(POLL)
        return result

    async def wait_async(self, ident: str, timeout: float | None = None) -> Result:
        """`wait` for asyncio callers: many episodes wait at once on one event loop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (result := self.poll(ident)) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {ident} not finished after {timeout} s")
            await asyncio.sleep(POLL)
        return result
