"""The Ray backend: the same orchestrator, with its workers on a Ray cluster.

Build work runs as Ray tasks on CPU (one core each, no GPU); each device worker is a Ray actor
holding one GPU (`num_gpus=1`; on a CPU-only cluster, one core), so Ray's own placement keeps
two timings off one GPU. The orchestrator stays on the driver and remains the store's only
writer. Every node must have rooftop installed and see the problems under the names the jobs
carry (a deck name, or a path that exists there); the solutions travel with the tasks.

Builders and device workers can be kept to nodes of their own: where some node advertises the
custom resource `rooftop_build` (`ray start --resources='{"rooftop_build": 1}'`), build tasks run
only on such nodes, and where some node advertises `rooftop_device`, device actors only on those.
A role no node advertises runs anywhere, as on a cluster that marks none. The marker's quantity
does not count workers (each asks `ROLE_SHARE` of it): a node's cores and GPUs still do.

Ray is an optional dependency (`pip install 'rooftop[ray]'`); nothing else imports this module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rooftop.build.jit import usable_cores
from rooftop.errors import UserError
from rooftop.service.local import cores_per_device, cores_set_apart
from rooftop.service.orchestrator import Orchestrator, Slot
from rooftop.service.queue import JobQueue
from rooftop.service.worker import AHEAD, Hello, Role, Task, jobs_held
from rooftop.vocabulary import DeviceType

BUILD_RESOURCE = "rooftop_build"  # a node advertising it takes the build tasks
DEVICE_RESOURCE = "rooftop_device"  # ... and this one the device actors
ROLE_SHARE = 0.001  # what a build task or device actor asks of its role's marker: a mark, not a count


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray: Ray is not installed (pip install 'rooftop[ray]')") from None
    return ray


def role_resources(cluster: Mapping[str, float]) -> dict[Role, dict[str, float]]:
    """The custom resources a build task and a device actor ask for, given the cluster's totals
    (`ray.cluster_resources()`): its role's marker where some node advertises it, so the work
    lands on the nodes set apart for it; none where no node does (any node will do)."""
    def marker(name: str) -> dict[str, float]:
        return {name: ROLE_SHARE} if cluster.get(name, 0) > 0 else {}

    return {"build": marker(BUILD_RESOURCE), "device": marker(DEVICE_RESOURCE)}


def _here(message: str) -> tuple[str, str]:
    """A worker's answer with the id of the node it ran on, which the transport notes."""
    import ray

    return ray.get_runtime_context().get_node_id(), message


class DeviceWorker:
    """A device worker as a Ray actor: the trusted side of every evaluation on its device. Each
    task comes with the tasks it holds after it (`ahead`), whose children a GPU worker starts
    during this one's early gates, as a local worker does with what waits in its pipe."""

    def __init__(self, device: DeviceType) -> None:
        from rooftop.integrity.environ import undumpable, withdraw_secrets

        undumpable()  # as a local worker: closed to a candidate run without a sandbox, and holding no key
        withdraw_secrets()
        self.device = device
        self.started_ahead: set[str] = set()

    def hello(self) -> tuple[str, str]:
        from rooftop.service.worker import describe_device

        return _here(Hello(target=describe_device(self.device)).model_dump_json())

    def run(self, message: str, ahead: list[str] | None = None) -> tuple[str, str]:
        from rooftop.service.worker import Inbox, device_healthy, run_task

        inbox = Inbox(None, [Task.model_validate_json(m) for m in ahead or []], self.started_ahead)
        outcome = run_task(Task.model_validate_json(message), self.device, inbox=inbox)
        outcome.healthy = outcome.healthy and device_healthy(self.device)
        return _here(outcome.model_dump_json())


def build(message: str) -> tuple[str, str]:
    from rooftop.service.worker import build_task

    return _here(build_task(Task.model_validate_json(message)).model_dump_json())


def actor_cpus(device: DeviceType, devices: int, address: str | None) -> int | None:
    """Cores a GPU actor holds for its life on a local instance: as many as a local GPU worker is
    set apart (its trusted side, its child and the children it starts ahead), where the host has
    them for every GPU and a builder besides, so that Ray runs no more builds at once than the
    cores left beside the timings (Ray counts cores; it does not pin them). None (Ray's default)
    on a CPU or a cluster, whose nodes may have fewer cores per GPU."""
    if device != "cuda" or address is not None:
        return None
    return cores_per_device(device) if cores_set_apart(device, devices, usable_cores()) else None


class RayTransport:
    """Device workers as actors, builds as tasks. `nodes` is the node each worker last answered
    from (a device worker's: its actor's) and `answers` how many answers each role sent from each
    node: where the work ran."""

    def __init__(self, address: str | None, cpus: int | None = None, device_cpus: int | None = None) -> None:
        ray = self.ray = _ray()
        self._started_here = not ray.is_initialized()
        if self._started_here:
            try:
                local = {"num_cpus": cpus, "object_store_memory": 256 << 20} if address is None else {}
                # "local": an instance of its own, not a cluster this host runs (`ray start`, a test's),
                # which Ray would join, given no address, and refuse the cores asked for
                ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                         configure_logging=False, **local)
            except (ConnectionError, ValueError) as exc:
                raise UserError(f"--address {address}: no Ray cluster could be reached ({exc})") from None
        self._actor = ray.remote(DeviceWorker)
        self._build = ray.remote(build)
        self._pending: dict[Any, Slot] = {}
        self._held: dict[str, list[str]] = {}  # a device worker's tasks after the one it runs, in order
        self._said: list[tuple[Slot, str | None, str]] = []
        self._device_cpus = device_cpus
        self._roles = role_resources(ray.cluster_resources())
        self.nodes: dict[str, str] = {}
        self.answers: Counter[tuple[Role, str]] = Counter()

    def start(self, slot: Slot) -> None:
        if slot.role == "build":
            slot.handle = "build"
            self._said.append((slot, Hello().model_dump_json(), ""))  # a task per build: nothing to wait for
            return
        resources = ({"num_gpus": 1} | ({"num_cpus": self._device_cpus} if self._device_cpus else {})
                     if slot.device == "cuda" else {"num_cpus": 1})
        actor = self._actor.options(**resources, resources=self._roles["device"], max_concurrency=1).remote(
            slot.device)
        slot.handle = actor
        self._pending[actor.hello.remote()] = slot

    def send(self, slot: Slot, task: Task) -> bool:
        message = task.model_dump_json()
        if slot.role == "build":
            self._pending[self._build.options(num_cpus=1, num_gpus=0, resources=self._roles["build"])
                          .remote(message)] = slot
        elif any(s is slot for s in self._pending.values()):
            self._held.setdefault(slot.name, []).append(message)  # sent, with those after it, once this one ends
        else:
            self._run(slot, message)
        return True

    def _run(self, slot: Slot, message: str) -> None:
        self._pending[slot.handle.run.remote(message, self._held.get(slot.name, [])[:AHEAD])] = slot

    def poll(self, slots: list[Slot], timeout: float) -> list[tuple[Slot, str | None, str]]:
        ray = self.ray
        said, self._said = self._said, []
        if not self._pending:
            return said
        ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=0 if said else timeout)
        if ready:
            more, _ = ray.wait([r for r in self._pending if r not in ready], num_returns=len(self._pending) - 1,
                               timeout=0) if len(self._pending) > 1 else ([], [])
            ready = [*ready, *more]
        for ref in ready:
            slot = self._pending.pop(ref)
            try:
                node, message = ray.get(ref)
            except Exception as exc:  # noqa: BLE001  (an actor or worker died: the orchestrator replaces it)
                self._held.pop(slot.name, None)
                said.append((slot, None, f"the Ray {slot.role} worker {slot.name} was lost: "
                                         f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"))
                continue
            self.nodes[slot.name] = node
            self.answers[slot.role, node] += 1
            said.append((slot, message, ""))
            if self._held.get(slot.name):
                self._run(slot, self._held[slot.name].pop(0))
        return said

    def stop(self, slots: list[Slot]) -> None:
        for slot in slots:
            self._held.pop(slot.name, None)
            self.nodes.pop(slot.name, None)
            for ref in [r for r, s in self._pending.items() if s is slot]:
                del self._pending[ref]
            if slot.role == "device" and slot.handle is not None:
                try:
                    self.ray.kill(slot.handle)  # asynchronous: the actors go down together
                except Exception:  # noqa: BLE001  (already gone)
                    pass
            slot.handle = None

    def close(self) -> None:
        if self._started_here:
            self.ray.shutdown()


def ray_orchestrator(queue: JobQueue, device: DeviceType, devices: int = 1, builders: int = 1,
                     address: str | None = None, recycle_after: int = 200) -> Orchestrator:
    slots = [Slot(name=f"{device}:{i}", role="device", device=device, depth=jobs_held(device)) for i in range(devices)]
    slots += [Slot(name=f"build:{i}", role="build", device=device) for i in range(builders)]
    # a local instance gets exactly the cores its workers ask for on a CPU, and on a GPU host the
    # cores this process may use (the count actor_cpus judged by)
    transport = RayTransport(address, cpus=usable_cores() if device == "cuda" else devices + builders,
                             device_cpus=actor_cpus(device, devices, address))
    return Orchestrator(queue, slots, transport, recycle_after)
