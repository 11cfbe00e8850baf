"""The inline backend: the orchestrator's workers as slots of this very process.

A device slot runs each task synchronously inside `poll` (`worker.run_task`, on a GPU with an
`Inbox` holding the tasks queued behind it, so that their children start ahead as in a local
worker); a build slot builds nothing and answers a build task at once as built: the
evaluation's own child compiles, as `rooftop eval` does. This is the backend of the in-process
commands (demo, selfcheck, batch-kb): no worker process to start, the caller's `Problem` objects
used as they are (by problem hash, so one changed in memory needs no folder of its own), and every
evaluation's events passed to the caller's sink for its job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from rooftop.pipeline.prebuild import Prebuilt
from rooftop.problem.spec import Problem
from rooftop.service.orchestrator import Orchestrator, Slot
from rooftop.service.queue import JobQueue
from rooftop.service.worker import (
    Hello,
    Inbox,
    Outcome,
    Task,
    describe_device,
    device_healthy,
    jobs_held,
    run_task,
)
from rooftop.vocabulary import DeviceType, EventSink

IDLE = 0.05  # seconds a poll with nothing to run waits (jobs held by another orchestrator of the store)

SinkFor = Callable[[str], EventSink | None]  # a job id -> the sink for its evaluation's events


class InlineTransport:
    """Slots whose handle is their `Inbox`; `finished` lists the jobs answered, oldest first, for a
    caller that reports each result as soon as the orchestrator has recorded it."""

    def __init__(self, sinks: SinkFor | None = None, problems: Mapping[str, Problem] | None = None,
                 ahead: bool = True) -> None:
        self.sinks, self.problems, self.ahead = sinks, dict(problems or {}), ahead
        self.finished: list[str] = []
        self._greeting: list[Slot] = []

    def start(self, slot: Slot) -> None:
        slot.handle = Inbox(None)
        self._greeting.append(slot)

    def send(self, slot: Slot, task: Task) -> bool:
        if not isinstance(slot.handle, Inbox):
            return False
        slot.handle.pending.append(task)
        return True

    def poll(self, slots: list[Slot], timeout: float) -> list[tuple[Slot, str | None, str]]:
        """Greetings first; then every build task answered, or else one device task run."""
        if self._greeting:
            greeted, self._greeting = self._greeting, []
            return [(slot, self._hello(slot), "") for slot in greeted]
        builds = [(slot, task) for slot in slots if slot.role == "build" and isinstance(slot.handle, Inbox)
                  for task in _take_all(slot.handle)]
        if builds:
            return [(slot, self._answer(slot, Outcome(job_id=task.job_id, prebuilt=Prebuilt())), "")
                    for slot, task in builds]
        for slot in slots:
            if slot.role == "device" and isinstance(slot.handle, Inbox) and slot.handle.pending:
                task = slot.handle.pending.popleft()
                sink = self.sinks(task.job_id) if self.sinks is not None else None
                outcome = run_task(task, slot.device, inbox=slot.handle if self.ahead else None, events=sink,
                                   problems=self.problems)
                outcome.healthy = outcome.healthy and device_healthy(slot.device)
                return [(slot, self._answer(slot, outcome), "")]
        time.sleep(min(timeout, IDLE))
        return []

    def stop(self, slots: list[Slot]) -> None:
        for slot in slots:
            slot.handle = None

    def close(self) -> None:
        pass

    def _answer(self, slot: Slot, outcome: Outcome) -> str:
        self.finished.append(outcome.job_id)
        return outcome.model_dump_json()

    @staticmethod
    def _hello(slot: Slot) -> str:
        return Hello(target=describe_device(slot.device) if slot.role == "device" else None).model_dump_json()


def _take_all(inbox: Inbox) -> list[Task]:
    tasks = list(inbox.pending)
    inbox.pending.clear()
    return tasks


def inline_orchestrator(queue: JobQueue, device: DeviceType, sinks: SinkFor | None = None,
                        problems: Mapping[str, Problem] | None = None, ahead: bool = True) -> Orchestrator:
    """One device slot (evaluations run one after another here) and one build slot; `ahead` False:
    no child is started ahead for the tasks queued behind the current one."""
    slots = [Slot(name=f"{device}:0", role="device", device=device, depth=jobs_held(device)),
             Slot(name="build:0", role="build", device=device)]
    return Orchestrator(queue, slots, InlineTransport(sinks, problems, ahead), recycle_after=1 << 30)
