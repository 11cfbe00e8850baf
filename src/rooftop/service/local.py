"""The local backend: a build pool and one worker per device on this machine, fed from the queue.

The orchestrator is the only process that writes the store. It claims jobs for idle workers,
records what they answer, renews its leases, and replaces a worker that died, reported itself
unhealthy, or ran `recycle_after` evaluations. Build workers and device workers get disjoint CPU
cores where the machine has enough, so compilers never run on the cores of a timing.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from rooftop.pipeline.job import DeviceType
from rooftop.pipeline.prebuild import BuildTarget
from rooftop.service.jobs import Job, JobState
from rooftop.service.queue import MAX_ATTEMPTS, JobQueue
from rooftop.service.worker import MESSAGES, Hello, Outcome, Role, Stage, Task, worker_main

RENEW_EVERY = 10.0  # seconds between lease renewals
CORES_PER_DEVICE = 2  # a device worker's trusted side and its candidate's child


@dataclass
class Slot:
    """One worker process and what it is doing."""

    name: str  # cuda:0, cpu:1, build:0
    role: Role
    device: DeviceType
    env: dict[str, str]
    cores: list[int]
    process: BaseProcess | None = None
    conn: Connection | None = None
    target: BuildTarget | None = None
    ready: bool = False
    job: Job | None = None
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


def plan_slots(device: DeviceType, devices: int, builders: int) -> list[Slot]:
    """Device workers first, each on cores of its own where there are enough; builders on the rest."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    split = len(cores) >= devices * CORES_PER_DEVICE + 1
    slots = []
    for i in range(devices):
        env = {"CUDA_VISIBLE_DEVICES": str(i)} if device == "cuda" else {}
        own = cores[i * CORES_PER_DEVICE:(i + 1) * CORES_PER_DEVICE] if split else []
        slots.append(Slot(name=f"{device}:{i}", role="device", device=device, env=env, cores=own))
    rest = cores[devices * CORES_PER_DEVICE:] if split else []
    for i in range(builders):
        # builders see no GPU at all: candidate code imported there cannot touch a timing
        slots.append(Slot(name=f"build:{i}", role="build", device=device, env={"CUDA_VISIBLE_DEVICES": ""},
                          cores=rest))
    return slots


class LocalBackend:
    def __init__(self, queue: JobQueue, device: DeviceType, devices: int = 1, builders: int = 1,
                 recycle_after: int = 200) -> None:
        self.queue, self.device = queue, device
        self.slots = plan_slots(device, devices, builders)
        self.recycle_after = recycle_after
        self.tally = Tally()
        self._context = multiprocessing.get_context("spawn")
        self._build_deaths: dict[str, int] = {}

    def run(self, ids: list[str], progress: ProgressFn | None = None) -> Tally:
        """Work until every job of `ids` is done or failed."""
        self.queue.recover()
        wanted = list(dict.fromkeys(ids))
        counts = self.queue.counts(wanted)
        if counts[JobState.done] + counts[JobState.failed] == len(wanted):
            return self.tally  # nothing left: no worker is started
        try:
            for slot in self.slots:
                self._start(slot)
            renewed = time.monotonic()
            while True:
                counts = self.queue.counts(wanted)
                if progress:
                    progress(counts, self.slots)
                if counts[JobState.done] + counts[JobState.failed] == len(wanted):
                    return self.tally
                self._dispatch(wanted)
                self._wait_and_handle(timeout=1.0)
                if time.monotonic() - renewed > RENEW_EVERY:
                    self.queue.renew()
                    renewed = time.monotonic()
        finally:
            self._stop_all()

    # -- workers ---------------------------------------------------------------------------
    def _start(self, slot: Slot) -> None:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=worker_main, args=(theirs, slot.role, slot.device, slot.env, slot.cores),
                                        name=f"rooftop-{slot.name}", daemon=True)
        process.start()
        theirs.close()
        slot.process, slot.conn, slot.ready, slot.job, slot.stage, slot.evaluations = process, ours, False, None, "", 0

    def _stop(self, slot: Slot) -> None:
        if slot.conn is not None:
            try:
                slot.conn.send(None)
            except OSError:
                pass
        if slot.process is not None:
            slot.process.join(timeout=5)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(timeout=5)
        if slot.conn is not None:
            slot.conn.close()
        slot.process, slot.conn, slot.ready = None, None, False

    def _stop_all(self) -> None:
        for slot in self.slots:
            if slot.job is not None:
                self.queue.release(slot.job.id)
                slot.job = None
            self._stop(slot)

    def _replace(self, slot: Slot, why: str) -> None:
        if slot.job is not None:
            ident = slot.job.id
            if slot.role == "build":
                self._build_deaths[ident] = self._build_deaths.get(ident, 0) + 1
                if self._build_deaths[ident] >= MAX_ATTEMPTS:
                    self.queue.fail(ident, f"its build ended with the build worker gone {MAX_ATTEMPTS} times: {why}")
                else:
                    self.queue.release(ident, why)
            else:
                self.queue.release(ident, why)
            slot.job = None
        self.tally.replaced += 1
        self._stop(slot)
        self._start(slot)

    # -- dispatching -----------------------------------------------------------------------
    def _target(self) -> BuildTarget | None:
        return next((s.target for s in self.slots if s.role == "device" and s.target is not None), None)

    def _dispatch(self, wanted: list[str]) -> None:
        target = self._target()
        for slot in self.slots:
            if not slot.ready or slot.job is not None:
                continue
            if slot.role == "build":
                if target is None:
                    continue  # builds wait until a device worker has said what to build for
                claimed = self.queue.claim(JobState.queued, JobState.building, ids=wanted)
            else:
                claimed = self.queue.claim(JobState.built, JobState.running, ids=wanted, device=slot.name)
            if not claimed:
                continue
            job = claimed[0]
            task = Task(kind="build" if slot.role == "build" else "run", job_id=job.id, problem=job.problem,
                        problem_hash=job.problem_hash, source=self.queue.source(job.source_hash),
                        settings=job.settings, label=job.solution, target=target if slot.role == "build" else None)
            assert slot.conn is not None
            try:
                slot.conn.send(task.model_dump_json())
            except OSError:
                slot.job = job
                self._replace(slot, "its worker could not be reached")
                continue
            slot.job, slot.stage = job, "build" if slot.role == "build" else "queued on the device"
            if slot.role == "build" and job.build_wait_s is not None:
                self.tally.build_wait.append(job.build_wait_s)

    def _wait_and_handle(self, timeout: float) -> None:
        by_conn = {slot.conn: slot for slot in self.slots if slot.conn is not None}
        sentinels = [slot.process.sentinel for slot in self.slots if slot.process is not None]
        for ready in wait([*by_conn, *sentinels], timeout=timeout):
            if ready in by_conn:
                slot = by_conn[ready]
                try:
                    message = slot.conn.recv() if slot.conn is not None else None
                except (EOFError, OSError):
                    continue  # its sentinel says what happened
                if message is not None:
                    self._handle(slot, message)
        for slot in self.slots:
            if slot.process is not None and not slot.process.is_alive():
                self._replace(slot, f"the {slot.role} worker {slot.name} exited with status {slot.process.exitcode}")

    def _handle(self, slot: Slot, message: str) -> None:
        said = MESSAGES.validate_json(message)
        if isinstance(said, Hello):
            slot.target, slot.ready = said.target, True
            return
        if isinstance(said, Stage):
            slot.stage = said.stage
            return
        outcome = said
        job = slot.job
        slot.job, slot.stage = None, ""
        if job is None or job.id != outcome.job_id:
            return
        held = JobState.building if slot.role == "build" else JobState.running
        if outcome.prebuilt is not None and outcome.prebuilt.compiled:
            self.tally.built += 1
            self.tally.build_cached += int(bool(outcome.prebuilt.cached))
            self.tally.build_seconds += outcome.prebuilt.seconds
        if outcome.verdict is not None:
            self._record(job, outcome, held)
        elif outcome.error is not None:
            self.queue.fail(job.id, outcome.error)
        elif outcome.prebuilt is not None:
            self.queue.built(job.id, outcome.prebuilt.seconds if outcome.prebuilt.compiled else None,
                             outcome.prebuilt.cached if outcome.prebuilt.compiled else None)
        if slot.role == "device":
            slot.evaluations += 1
        if not outcome.healthy or slot.evaluations >= self.recycle_after:
            self.tally.recycled += 1
            self._stop(slot)
            self._start(slot)

    def _record(self, job: Job, outcome: Outcome, held: JobState) -> None:
        from rooftop.pipeline.scoring import attach_stored_baselines

        verdict = outcome.verdict
        assert verdict is not None
        attach_stored_baselines(verdict, self.queue.store)
        self.queue.finish(job.id, verdict, held=held)

