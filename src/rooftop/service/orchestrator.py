"""The orchestrator: one loop that feeds the queue's jobs to workers and records what they answer.

It is the only writer of the store. It claims jobs for idle workers (queued ones for build
workers, built ones for device workers), records each outcome (a verdict and the job's move to
done in one transaction), renews its leases, and replaces a worker that died, reported itself
unhealthy, or ran `recycle_after` evaluations. Where the workers live is a transport's business:
processes on this machine (service/local.py) or Ray actors and tasks (service/ray_backend.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rooftop.pipeline.prebuild import BuildTarget
from rooftop.service.jobs import Job, JobState
from rooftop.service.queue import MAX_ATTEMPTS, JobQueue
from rooftop.service.worker import MESSAGES, Hello, Outcome, Role, Stage, Task
from rooftop.vocabulary import DeviceType

RENEW_EVERY = 10.0  # seconds between lease renewals
COUNT_EVERY = 0.1  # seconds at least between two counts of a batch's jobs while outcomes come in ...
COUNT_IDLE = 0.5  # ... and at most while none do


@dataclass
class Slot:
    """One worker and what it is doing."""

    name: str  # cuda:0, cpu:1, build:0
    role: Role
    device: DeviceType
    env: dict[str, str] = field(default_factory=dict)
    cores: list[int] = field(default_factory=list)
    handle: Any = None  # the transport's: a process and its pipe, or a Ray actor
    target: BuildTarget | None = None
    ready: bool = False
    jobs: list[Job] = field(default_factory=list)  # the first is under way, the rest wait on this worker
    depth: int = 1  # jobs handed to it at once: a device worker given the next one starts its child early
    stage: str = ""
    evaluations: int = 0


@dataclass
class Tally:
    """What a batch did, for its summary: the build cache and the waits."""

    built: int = 0
    build_cached: int = 0
    build_seconds: float = 0.0
    build_wait: list[float] = field(default_factory=list)
    recycled: int = 0
    replaced: int = 0


ProgressFn = Callable[[dict[JobState, int], list[Slot]], None]


class Transport(Protocol):
    """How an orchestrator reaches its workers."""

    def start(self, slot: Slot) -> None:
        """Start the worker; it answers with a Hello when ready."""

    def send(self, slot: Slot, task: Task) -> bool:
        """Hand it a task; False when it cannot be reached."""

    def poll(self, slots: list[Slot], timeout: float) -> list[tuple[Slot, str | None, str]]:
        """Messages that arrived (JSON), and workers found gone (None, with why)."""

    def stop(self, slots: list[Slot]) -> None:
        """Stop these workers; their jobs were released already."""

    def close(self) -> None: ...


class Orchestrator:
    def __init__(self, queue: JobQueue, slots: list[Slot], transport: Transport, recycle_after: int = 200) -> None:
        self.queue, self.slots, self.transport = queue, slots, transport
        self.recycle_after = recycle_after
        self.tally = Tally()
        self._build_deaths: dict[str, int] = {}
        self._outcomes = 0  # outcomes handled (a job recorded, failed or built)

    def run(self, ids: list[str], progress: ProgressFn | None = None) -> Tally:
        """Work until every job of `ids` is done or failed."""
        self.queue.recover()
        wanted = list(dict.fromkeys(ids))
        counts = self.queue.counts(wanted)
        if counts[JobState.done] + counts[JobState.failed] == len(wanted):
            return self.tally  # nothing left: no worker is started
        counted = (self._outcomes, time.monotonic())  # outcomes handled and the time at the last count

        def finished() -> bool:
            # counting a large batch's jobs costs milliseconds (27 for 20,000): at most every
            # COUNT_EVERY while outcomes come in, every COUNT_IDLE otherwise (a job may end
            # elsewhere: another orchestrator working the same store), and at once when enough
            # outcomes came in since the last count for every job to be over
            nonlocal counts, counted
            since, left = time.monotonic() - counted[1], len(wanted) - counts[JobState.done] - counts[JobState.failed]
            new = self._outcomes - counted[0]
            if new >= left or (new and since > COUNT_EVERY) or since > COUNT_IDLE:
                counts, counted = self.queue.counts(wanted), (self._outcomes, time.monotonic())
            if progress:
                progress(counts, self.slots)
            return counts[JobState.done] + counts[JobState.failed] == len(wanted)

        return self._work(frozenset(wanted), finished)

    def serve(self, stop: threading.Event, poll: float = 0.05) -> Tally:
        """Work off every open job of the store, whoever queued it, until `stop` is set: the
        service behind the environment and the server, which queue jobs while it runs."""
        self.queue.recover()
        return self._work(None, stop.is_set, poll)

    def _work(self, wanted: frozenset[str] | None, finished: Callable[[], bool], poll: float = 1.0) -> Tally:
        try:
            for slot in self.slots:
                self.transport.start(slot)
            renewed = time.monotonic()
            while not finished():
                self._dispatch(wanted)
                for slot, message, why in self.transport.poll(self.slots, timeout=poll):
                    if message is None:
                        self._replace(slot, why)
                    else:
                        self._handle(slot, message)
                if time.monotonic() - renewed > RENEW_EVERY:
                    self.queue.renew()
                    renewed = time.monotonic()
            return self.tally
        finally:
            for slot in self.slots:
                for index, job in enumerate(slot.jobs):  # those waiting behind the first never started
                    self.queue.release(job.id, started=index == 0)
                slot.jobs = []
            self.transport.stop(self.slots)
            self.transport.close()

    def _restart(self, slot: Slot) -> None:
        self.transport.stop([slot])
        for job in slot.jobs:  # held behind the one that ended, never begun: back to the queue
            self.queue.release(job.id, started=False)
        slot.ready, slot.jobs, slot.stage, slot.evaluations, slot.target = False, [], "", 0, None
        self.transport.start(slot)

    def _replace(self, slot: Slot, why: str) -> None:
        for index, job in enumerate(slot.jobs):
            if index > 0:  # it had not started: its attempt does not count
                self.queue.release(job.id, why, started=False)
            elif slot.role == "build":
                self._build_deaths[job.id] = self._build_deaths.get(job.id, 0) + 1
                if self._build_deaths[job.id] >= MAX_ATTEMPTS:
                    self.queue.fail(job.id, f"its build ended with the build worker gone {MAX_ATTEMPTS} times: {why}")
                else:
                    self.queue.release(job.id, why)
            else:
                self.queue.release(job.id, why)
        slot.jobs = []
        self.tally.replaced += 1
        self._restart(slot)

    def _target(self) -> BuildTarget | None:
        return next((s.target for s in self.slots if s.role == "device" and s.target is not None), None)

    def _dispatch(self, wanted: frozenset[str] | None) -> None:
        target = self._target()
        empty: set[str] = set()  # roles that found nothing to claim this time: their other slots need not ask
        # first every idle worker gets one job, then device workers more, to start their children ahead
        for depth in range(1, 1 + max(s.depth for s in self.slots)):
            for slot in self.slots:
                if not slot.ready or len(slot.jobs) >= min(depth, slot.depth) or slot.role in empty:
                    continue
                if slot.role == "build" and target is None:
                    continue  # builds wait until a device worker has said what to build for
                if slot.role == "build":
                    claimed = self.queue.claim(JobState.queued, JobState.building, ids=wanted)
                else:
                    claimed = self.queue.claim(JobState.built, JobState.running, ids=wanted, device=slot.name)
                if claimed:
                    self._send(slot, claimed[0], target)
                else:
                    empty.add(slot.role)

    def _send(self, slot: Slot, job: Job, target: BuildTarget | None) -> None:
        task = Task(kind="build" if slot.role == "build" else "run", job_id=job.id, problem=job.problem,
                    problem_hash=job.problem_hash, source=self.queue.source(job.source_hash),
                    settings=job.settings, label=job.solution, target=target if slot.role == "build" else None)
        slot.jobs.append(job)
        if len(slot.jobs) == 1:
            slot.stage = "build" if slot.role == "build" else "starting"
        if not self.transport.send(slot, task):
            self._replace(slot, "its worker could not be reached")
            return
        if slot.role == "build" and job.build_wait_s is not None:
            self.tally.build_wait.append(job.build_wait_s)

    def _handle(self, slot: Slot, message: str) -> None:
        said = MESSAGES.validate_json(message)
        if isinstance(said, Hello):
            slot.target, slot.ready = said.target, True
            return
        if isinstance(said, Stage):
            slot.stage = said.stage
            return
        self._finish(slot, said)

    def _finish(self, slot: Slot, outcome: Outcome) -> None:
        job = next((j for j in slot.jobs if j.id == outcome.job_id), None)
        if job is None:
            return
        self._outcomes += 1
        slot.jobs.remove(job)
        slot.stage = "starting" if slot.jobs else ""
        held = JobState.building if slot.role == "build" else JobState.running
        built = outcome.prebuilt
        if built is not None and built.compiled:
            self.tally.built += 1
            self.tally.build_cached += int(bool(built.cached))
            self.tally.build_seconds += built.seconds
        if outcome.verdict is not None:
            from rooftop.pipeline.trusted.scoring import attach_stored_baselines

            attach_stored_baselines(outcome.verdict, self.queue.store)
            self.queue.finish(job.id, outcome.verdict, held=held)
        elif outcome.error is not None:
            self.queue.fail(job.id, outcome.error)
        elif built is not None:
            self.queue.built(job.id, built.seconds if built.compiled else None,
                             built.cached if built.compiled else None)
        if slot.role == "device":
            slot.evaluations += 1
        if not outcome.healthy or slot.evaluations >= self.recycle_after:
            self.tally.recycled += 1
            self._restart(slot)
