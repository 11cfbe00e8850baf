"""The parts of a batch: submissions queued as jobs, and the backends whose orchestrators work
them off until each is done or failed. `service/many.run_many` is the one way to run a batch and
wait for it (`rooftop batch`, demo, selfcheck, batch-kb); the `Evaluator` behind the env and the
server makes its orchestrator here too.

Submitting is idempotent (service/jobs.py), so running the same batch again, after a crash or to
add candidates, judges only what has no verdict yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rooftop.errors import UserError
from rooftop.plugins import Registry, UnknownName
from rooftop.service.inputs import Submission
from rooftop.service.local import default_builders, local_orchestrator
from rooftop.service.orchestrator import Orchestrator
from rooftop.service.queue import JobQueue
from rooftop.vocabulary import DeviceType, Settings


def submit(queue: JobQueue, submissions: Sequence[Submission], settings: Settings, *, again: bool = False,
           prebuild: bool = True) -> tuple[list[str], int]:
    """The job ids, in submission order, and how many of them are new (`again`: all of them, each
    judged afresh; `prebuild`: as `JobQueue.submit`)."""
    ids, new = [], 0
    for item in submissions:
        ident, fresh = queue.submit(item.problem, item.source, settings, label=item.label, again=again,
                                    prebuild=prebuild)
        ids.append(ident)
        new += int(fresh)
    return ids, new


def gpu_count(device: DeviceType) -> int:
    if device != "cuda":
        return 0
    import torch

    return torch.cuda.device_count()


def device_count(device: DeviceType, workers: int | None, backend: str = "local") -> int:
    """Device workers: one per GPU torch sees, or `workers` of them; on a CPU, `workers` (default
    1), each an evaluation at a time on a share of the cores. Local workers beyond one per GPU
    share the GPUs in turn and take turns on each (pipeline/trusted/device_lease.py): only their static
    checks and the children they start ahead run while another evaluation holds the GPU. Ray gives
    each device worker a whole GPU."""
    if device == "cuda":
        gpus = gpu_count(device)
        if backend == "ray" and workers is not None and workers > gpus:
            raise UserError(f"--workers {workers}: this machine has {gpus} GPU(s), and the ray backend gives "
                            f"each worker a whole GPU; use at most {gpus} or the local backend")
        return workers or gpus
    return workers or 1


class Backend(Protocol):
    def __call__(self, queue: JobQueue, device: DeviceType, *, devices: int, builders: int, address: str | None,
                 recycle_after: int) -> Orchestrator: ...


BACKENDS: Registry[Backend] = Registry("backend")


@BACKENDS.register("local")
def _local(queue: JobQueue, device: DeviceType, *, devices: int, builders: int, address: str | None,
           recycle_after: int) -> Orchestrator:
    """Processes on this machine."""
    no_cluster(address)
    return local_orchestrator(queue, device, devices=devices, builders=builders, recycle_after=recycle_after,
                              gpus=gpu_count(device))


@BACKENDS.register("ray")
def _ray(queue: JobQueue, device: DeviceType, *, devices: int, builders: int, address: str | None,
         recycle_after: int) -> Orchestrator:
    """Actors and tasks on a Ray cluster (`address`, else one started here)."""
    from rooftop.service.ray_backend import ray_orchestrator

    return ray_orchestrator(queue, device, devices=devices, builders=builders, address=address,
                            recycle_after=recycle_after)


@BACKENDS.register("inline")
def _inline(queue: JobQueue, device: DeviceType, *, devices: int, builders: int, address: str | None,
            recycle_after: int) -> Orchestrator:
    """This process: one evaluation after another, nothing built ahead (service/inline.py)."""
    from rooftop.service.inline import inline_orchestrator

    no_cluster(address)
    return inline_orchestrator(queue, device)


def no_cluster(address: str | None) -> None:
    """A usage error for a cluster address given to a backend that joins none."""
    if address is not None:
        raise UserError("--address: only the ray backend connects to a cluster (add --backend ray)")


def orchestrator_for(queue: JobQueue, device: DeviceType, *, workers: int | None = None,
                     builders: int | None = None, backend: str = "local", address: str | None = None,
                     recycle_after: int = 200) -> Orchestrator:
    """The orchestrator of a backend (`BACKENDS`). Without `builders`, one build worker per core
    this host has beside its device workers'."""
    try:
        make = BACKENDS[backend]
    except UnknownName as exc:
        raise UserError(f"--backend: {exc}") from None
    devices = device_count(device, workers, backend)
    return make(queue, device, devices=devices, builders=builders or default_builders(device, devices),
                address=address, recycle_after=recycle_after)

