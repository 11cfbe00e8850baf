"""The local backend: a build pool and one worker per device, as processes on this machine.

Build workers and device workers get disjoint CPU cores where the machine has enough (a GPU's
worker five: its trusted side, its candidate's child, and the three children started ahead for
the jobs after it; a CPU's four), so compilers never run on the cores of a timing. Every worker
dies with the orchestrator.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from rooftop.service.orchestrator import Orchestrator, Slot
from rooftop.service.queue import JobQueue
from rooftop.service.worker import AHEAD, Task, jobs_held, worker_main
from rooftop.vocabulary import DeviceType


def cores_per_device(device: DeviceType) -> int:
    """Cores set apart for one device worker. On a GPU: its trusted side, the child timing and the
    AHEAD children coming up, each on a core of its own: a child's start (interpreter, torch, CUDA
    context) is seconds of CPU, and children starting on fewer cores slow each other and can take
    the timing child's core from under its launches. On a CPU: the trusted side and the child."""
    return 2 + AHEAD if device == "cuda" else 4


def cores_set_apart(device: DeviceType, devices: int, cores: int) -> bool:
    """Whether `cores` give every device worker its own (cores_per_device) and a builder one besides."""
    return cores >= devices * cores_per_device(device) + 1


BUILD_MEMORY = 2 << 30  # a build worker's share of the host's memory: nvcc on torch's headers peaks near 1.5 GB
MAX_BUILDERS = 64
STOP_WAIT = 5.0  # seconds workers told to stop get to exit before they are killed


def default_builders(device: DeviceType, devices: int) -> int:
    """Build workers when none are asked for: one per core left beside the device workers' (an
    nvcc build keeps one core busy for tens of seconds, and one builder behind a GPU leaves it
    waiting on compilers), as the host's memory allows."""
    from rooftop.build.jit import usable_cores
    from rooftop.integrity.watchdog import host_memory_bytes

    spare = usable_cores() - devices * cores_per_device(device)
    return max(1, min(spare, host_memory_bytes() // BUILD_MEMORY, MAX_BUILDERS))


def visible_gpu(index: int) -> str:
    """What a worker's CUDA_VISIBLE_DEVICES must say for this process's GPU `index`: the index-th
    entry of our own CUDA_VISIBLE_DEVICES when it is set (an index or a UUID), so that a batch run
    with CUDA_VISIBLE_DEVICES=1 puts its worker on the host's GPU 1, not on GPU 0 beside whatever
    runs there (never one outside that list); the index itself when it is not set."""
    listed = [entry.strip() for entry in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    return listed[index % len(listed)] if listed else str(index)


def plan_slots(device: DeviceType, devices: int, builders: int, gpus: int = 0) -> list[Slot]:
    """Device workers first, each on cores of its own where there are enough; builders on the rest.
    On `gpus` GPUs, device worker i gets GPU i modulo their number (more workers than GPUs share)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    per = cores_per_device(device)
    split = cores_set_apart(device, devices, len(cores))
    slots = []
    for i in range(devices):
        turn, gpu = divmod(i, gpus or devices)
        env = {"CUDA_VISIBLE_DEVICES": visible_gpu(gpu)} if device == "cuda" else {}
        own = cores[i * per:(i + 1) * per] if split else []
        # a GPU's second worker is cuda:0.1, so a job's `device` names its GPU
        name = f"{device}:{gpu}" + (f".{turn}" if turn else "") if device == "cuda" else f"{device}:{i}"
        slots.append(Slot(name=name, role="device", device=device, env=env, cores=own, depth=jobs_held(device)))
    rest = cores[devices * per:] if split else []
    for i in range(builders):
        # builders see no GPU at all: candidate code imported there cannot touch a timing
        slots.append(Slot(name=f"build:{i}", role="build", device=device, env={"CUDA_VISIBLE_DEVICES": ""},
                          cores=rest))
    return slots


class ProcessTransport:
    """Workers as spawned processes, each with a pipe; a dead one is seen through its sentinel."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")

    def start(self, slot: Slot) -> None:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=worker_main, args=(theirs, slot.role, slot.device, slot.env, slot.cores),
                                        name=f"rooftop-{slot.name}", daemon=True)
        with _main_script_hidden():
            process.start()
        theirs.close()
        slot.handle = (process, ours)

    def send(self, slot: Slot, task: Task) -> bool:
        _, conn = self._parts(slot)
        try:
            conn.send(task.model_dump_json())
            return True
        except OSError:
            return False

    def poll(self, slots: list[Slot], timeout: float) -> list[tuple[Slot, str | None, str]]:
        live = [s for s in slots if s.handle is not None]
        by_conn = {self._parts(s)[1]: s for s in live}
        got: list[tuple[Slot, str | None, str]] = []
        for ready in wait([*by_conn, *(self._parts(s)[0].sentinel for s in live)], timeout=timeout):
            slot = by_conn.get(ready) if isinstance(ready, Connection) else None
            if slot is None:
                continue
            try:
                message = self._parts(slot)[1].recv()
            except (EOFError, OSError):
                continue  # its sentinel says what happened
            if isinstance(message, str):
                got.append((slot, message, ""))
        for slot in live:
            process, _ = self._parts(slot)
            if not process.is_alive() and not any(s is slot and m is not None for s, m, _ in got):
                got.append((slot, None, f"the {slot.role} worker {slot.name} exited with status {process.exitcode}"))
        return got

    def stop(self, slots: list[Slot]) -> None:
        # every worker is told first and then waited for: a worker takes most of a second to exit
        # (torch's teardown), so one after another cost a batch of 44 workers half a minute
        running = [(slot, *self._parts(slot)) for slot in slots if slot.handle is not None]
        for _, _, conn in running:
            try:
                conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + STOP_WAIT
        for _, process, _ in running:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for slot, process, conn in running:
            if process.is_alive():
                process.kill()
                process.join(timeout=STOP_WAIT)
            conn.close()
            slot.handle = None

    def close(self) -> None:
        pass

    @staticmethod
    def _parts(slot: Slot) -> tuple[BaseProcess, Connection]:
        process, conn = slot.handle
        return process, conn


@contextlib.contextmanager
def _main_script_hidden() -> Iterator[None]:
    """Start a spawned worker without it running the caller's script again: a worker needs
    nothing from it, and a trainer's script without an `if __name__ == "__main__"` guard would
    otherwise start a service in every worker."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def local_orchestrator(queue: JobQueue, device: DeviceType, devices: int = 1, builders: int = 1,
                       recycle_after: int = 200, gpus: int = 0) -> Orchestrator:
    return Orchestrator(queue, plan_slots(device, devices, builders, gpus), ProcessTransport(), recycle_after)
