"""The Ray backend on a cluster of several nodes, all on this host (`ray.cluster_utils.Cluster`):
builds and evaluations kept to the nodes marked for them, and a device node lost mid-batch with
no job lost or recorded twice."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import FIXTURES, fixture_problem

from rooftop import Settings
from rooftop.service.jobs import JobState, SourceSnapshot
from rooftop.service.queue import JobQueue
from rooftop.store.db import Store

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402  (after the skip: Ray is optional)

from rooftop.service.ray_backend import (  # noqa: E402
    BUILD_RESOURCE,
    DEVICE_RESOURCE,
    ROLE_SHARE,
    RayTransport,
    ray_orchestrator,
    role_resources,
)

GOOD = (FIXTURES / "solutions/good.py").read_text()
# a candidate with CUDA to compile, which the static gate refuses (it calls torch.mul, forbidden by
# `scale`): it goes through a build worker, which settles it in milliseconds without a compiler
REFUSED_CUDA = (FIXTURES / "solutions/cuda_inline_ok.py").read_text().replace(
    "_ext.scale(x.contiguous(), self.alpha)", "torch.mul(x, self.alpha)")
SETTINGS = Settings(device="cpu", shapes="tiny", timing=False)
NODE: dict[str, Any] = {"num_cpus": 1, "object_store_memory": 100 << 20}  # a worker node's


class Nodes:
    """The cluster and its worker nodes by role."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.build = [cluster.add_node(**NODE, resources={BUILD_RESOURCE: 1})]
        self.device = [cluster.add_node(**NODE, resources={DEVICE_RESOURCE: 1}) for _ in range(2)]

    def ids(self, role: str) -> set[str]:
        return {n.node_id for n in (self.build if role == "build" else self.device)}


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    """A head node with no cores (the driver's: no work lands there), one build node and two
    device nodes of one core each. Their workers inherit this process's environment when the
    nodes start, so the session's build cache is set first. Shut down whatever happens."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROOFTOP_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": 100 << 20})
        try:
            yield Nodes(cluster)
        finally:
            ray.shutdown()
            cluster.shutdown()


@pytest.fixture
def queue(tmp_path) -> Iterator[JobQueue]:
    store = Store(tmp_path / "r.db")
    yield JobQueue(store)
    store.close()


def _submit(queue: JobQueue, source: str, copies: int) -> list[str]:
    """`copies` distinct jobs of one candidate (a trailing comment apiece)."""
    problem = fixture_problem("scale")
    return [queue.submit(problem, SourceSnapshot.from_code(source + f"\n# copy {i}\n"), SETTINGS)[0]
            for i in range(copies)]


def _verdicts_per_source(queue: JobQueue) -> Counter[str]:
    return Counter(row.source_hash for row in queue.store.evaluations.rows())


def _where(transport: Any) -> dict[str, set[str]]:
    """The nodes each role's answers came from."""
    assert isinstance(transport, RayTransport)
    placed: dict[str, set[str]] = {"build": set(), "device": set()}
    for role, node in transport.answers:
        placed[role].add(node)
    return placed


def test_a_role_is_kept_to_its_marked_nodes_only_where_some_node_is_marked():
    assert role_resources({"CPU": 8.0, "GPU": 2.0}) == {"build": {}, "device": {}}  # as before: anywhere
    assert role_resources({"CPU": 8.0, BUILD_RESOURCE: 1.0}) == {"build": {BUILD_RESOURCE: ROLE_SHARE}, "device": {}}
    assert role_resources({BUILD_RESOURCE: 2.0, DEVICE_RESOURCE: 3.0})["device"] == {DEVICE_RESOURCE: ROLE_SHARE}


@pytest.mark.slow  # both cluster tests: about 40 s with the cluster's start
@pytest.mark.timeout(300)
def test_builds_and_evaluations_run_on_the_nodes_marked_for_them(nodes, queue):
    refused = _submit(queue, REFUSED_CUDA, 2)
    good = _submit(queue, GOOD, 2)
    orchestrator = ray_orchestrator(queue, "cpu", devices=2, builders=1, address=nodes.cluster.address)
    orchestrator.run(refused + good)

    assert [(j.state, j.status) for j in queue.jobs(refused)] == [(JobState.done, "rejected")] * 2
    assert [(j.state, j.status) for j in queue.jobs(good)] == [(JobState.done, "correct")] * 2
    placed = _where(orchestrator.transport)
    assert placed["build"] and placed["build"] <= nodes.ids("build")
    assert placed["device"] and placed["device"] <= nodes.ids("device")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_device_node_lost_mid_batch_loses_no_job_and_records_none_twice(nodes, queue):
    """The one device worker's node is removed while it evaluates a job: its actor is replaced on
    the other device node, the job goes back to the queue and is evaluated again there."""
    ids = _submit(queue, GOOD, 4)
    orchestrator = ray_orchestrator(queue, "cpu", devices=1, builders=1, address=nodes.cluster.address)
    transport = orchestrator.transport
    assert isinstance(transport, RayTransport)
    device = orchestrator.slots[0]
    killed: dict[str, str] = {}
    over = threading.Event()

    def kill_once_a_job_runs() -> None:
        while not over.is_set():
            jobs, node = list(device.jobs), transport.nodes.get(device.name)
            if jobs and node is not None:
                killed.update(job=jobs[0].id, node=node)
                nodes.cluster.remove_node(next(n for n in nodes.device if n.node_id == node))
                return
            over.wait(0.02)

    killer = threading.Thread(target=kill_once_a_job_runs, daemon=True)
    killer.start()
    try:
        orchestrator.run(ids)
    finally:
        over.set()
        killer.join(timeout=60)

    assert killed, "no job was seen running on a device node"
    jobs = queue.jobs(ids)
    assert [(j.state, j.status) for j in jobs] == [(JobState.done, "correct")] * len(ids)
    assert _verdicts_per_source(queue) == Counter({j.source_hash: 1 for j in jobs})
    assert orchestrator.tally.replaced >= 1
    assert next(j for j in jobs if j.id == killed["job"]).attempts >= 2
    placed = _where(transport)
    assert killed["node"] in placed["device"] and len(placed["device"]) == 2  # the second actor: the other node
    assert placed["device"] <= nodes.ids("device")
