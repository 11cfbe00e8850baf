"""The GPU lease (pipeline/trusted/device_lease.py): one evaluation on a GPU at a time, across processes;
and device workers beyond one per GPU, which share the GPUs and take turns on each."""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import HAS_CUDA

from rooftop.errors import UserError
from rooftop.pipeline.trusted.device_lease import DeviceLease

HOLDER = """
import json, sys, time
from rooftop.pipeline.trusted.device_lease import DeviceLease
from pathlib import Path
lease = DeviceLease("gpu-test", Path(sys.argv[1]))
told = []
waited = lease.acquire(on_wait=told.append)
start = time.monotonic()
print(json.dumps({"start": start}), flush=True)
time.sleep(float(sys.argv[2]))
end = time.monotonic()
lease.release()
print(json.dumps({"end": end, "waited": waited, "told": told}), flush=True)
"""


def _holder(folder, hold: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(folder), str(hold)], stdout=subprocess.PIPE, text=True)


def test_two_processes_never_hold_one_gpu_at_once(tmp_path):
    first = _holder(tmp_path, 1.0)
    start_a = json.loads(first.stdout.readline())["start"]  # the first holds it now
    second = _holder(tmp_path, 0.1)
    end_a = json.loads(first.stdout.readline())
    start_b = json.loads(second.stdout.readline())["start"]
    end_b = json.loads(second.stdout.readline())
    assert first.wait() == 0 and second.wait() == 0
    assert start_a < end_a["end"] <= start_b < end_b["end"]
    assert end_a["waited"] < 0.5 and end_b["waited"] > 0.3
    [told] = end_b["told"]
    assert told.startswith(f"pid {first.pid} on ") and " since " in told


def test_a_killed_holder_leaves_the_gpu_free(tmp_path):
    holder = _holder(tmp_path, 60)
    json.loads(holder.stdout.readline())
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    lease = DeviceLease("gpu-test", tmp_path)
    assert lease.acquire() < 0.5 and lease.held
    lease.release()
    assert not lease.held and lease.holder() == ""


def test_giving_up_while_waiting_takes_nothing(tmp_path):
    holder = _holder(tmp_path, 60)
    json.loads(holder.stdout.readline())
    lease, tries = DeviceLease("gpu-test", tmp_path), []

    def cancel() -> None:
        tries.append(1)
        if len(tries) == 3:
            raise TimeoutError("given up")

    try:
        with pytest.raises(TimeoutError):
            lease.acquire(check=cancel)
        assert not lease.held and len(tries) == 3
    finally:
        holder.kill()
        holder.wait()


def test_the_lease_file_is_open_to_every_user(tmp_path):
    old = os.umask(0o077)
    try:
        lease = DeviceLease("gpu-test", tmp_path)
        lease.acquire()
    finally:
        os.umask(old)
    assert (lease.path.stat().st_mode & 0o777) == 0o666
    assert lease.holder().startswith(f"pid {os.getpid()} ")
    lease.release()


def test_the_leases_folder_is_shared_and_a_bad_one_is_named(tmp_path, monkeypatch):
    from rooftop.pipeline.trusted.device_lease import LOCKS_ENV, lock_folder

    monkeypatch.setenv(LOCKS_ENV, str(tmp_path / "locks"))
    assert (lock_folder().stat().st_mode & 0o7777) == 0o1777
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(LOCKS_ENV, str(tmp_path / "file" / "locks"))
    with pytest.raises(UserError, match=f"{LOCKS_ENV}=.*file/locks: cannot make the GPU leases' folder"):
        lock_folder()
    with pytest.raises(UserError, match="cannot open the GPU lease .*set ROOFTOP_LOCKS"):
        DeviceLease("gpu-test", tmp_path / "missing").acquire()


def test_more_device_workers_than_gpus_share_them_in_turn(monkeypatch):
    from rooftop.service import batch
    from rooftop.service.local import plan_slots

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the host's GPUs, as a GPU test run may narrow them
    slots = [s for s in plan_slots("cuda", 3, 1, gpus=2) if s.role == "device"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in slots] == ["0", "1", "0"]
    assert [s.name for s in slots] == ["cuda:0", "cuda:1", "cuda:0.1"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in plan_slots("cuda", 2, 1) if s.role == "device"] == ["0", "1"]
    monkeypatch.setattr(batch, "gpu_count", lambda device: 1)
    assert batch.device_count("cuda", 2) == 2 and batch.device_count("cuda", None) == 1
    with pytest.raises(UserError, match="--workers 2: this machine has 1 GPU"):
        batch.device_count("cuda", 2, backend="ray")


def test_device_workers_get_the_gpus_this_process_was_given_not_the_hosts_first(monkeypatch):
    from rooftop.service.local import plan_slots

    def gpus_of(visible: str | None, devices: int, gpus: int) -> list[str]:
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        return [s.env["CUDA_VISIBLE_DEVICES"] for s in plan_slots("cuda", devices, 1, gpus=gpus) if s.role == "device"]

    assert gpus_of("1", 1, 1) == ["1"]  # was "0": the host's first GPU, another user's
    assert gpus_of("2,3", 3, 2) == ["2", "3", "2"]
    assert gpus_of("GPU-aa, GPU-bb", 2, 2) == ["GPU-aa", "GPU-bb"]
    assert gpus_of(None, 2, 2) == ["0", "1"]
    assert gpus_of("3", 2, 0) == ["3", "3"]  # never a GPU outside the list
    assert [s.name for s in plan_slots("cuda", 2, 1, gpus=2) if s.role == "device"] == ["cuda:0", "cuda:1"]


def test_each_gpu_worker_gets_a_core_for_itself_its_child_and_each_child_started_ahead(monkeypatch):
    from rooftop.service import local
    from rooftop.service.worker import AHEAD

    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: set(range(64)))
    slots = local.plan_slots("cuda", 4, 40, gpus=4)
    devices = [s for s in slots if s.role == "device"]
    assert [len(s.cores) for s in devices] == [2 + AHEAD] * 4
    assert len({c for s in devices for c in s.cores}) == 4 * (2 + AHEAD)  # disjoint
    builders = {c for s in slots if s.role == "build" for c in s.cores}
    assert builders == set(range(64)) - {c for s in devices for c in s.cores}
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: set(range(8)))  # too few to split
    assert all(s.cores == [] for s in local.plan_slots("cuda", 2, 4, gpus=2))


def test_without_builders_asked_for_each_core_beside_the_device_workers_gets_one(monkeypatch):
    from rooftop.service import local

    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: set(range(64)))
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (512 << 30) // 4096}
    monkeypatch.setattr(local.os, "sysconf", lambda name: pages[name])
    assert local.default_builders("cuda", 4) == 64 - 4 * local.cores_per_device("cuda")
    assert local.default_builders("cuda", 8) == 64 - 8 * local.cores_per_device("cuda")
    pages["SC_PHYS_PAGES"] = (16 << 30) // 4096  # memory binds first: a build's nvcc needs its share
    assert local.default_builders("cuda", 4) == 16 // 2
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: {0, 1})  # no core to spare: one all the same
    assert local.default_builders("cpu", 1) == 1


# -- on a GPU: two evaluations of one GPU take turns ---------------------------------------------------
EVALUATE = """
import json, sys, time
from rooftop.pipeline.evaluate import evaluate
from rooftop.vocabulary import DeviceWait, GateFinished, GateStarted
from rooftop.vocabulary import Settings
from rooftop.problem.loader import load_problem
from rooftop.solution.loader import load_solution
seen = {"waits": []}
def sink(event):
    if isinstance(event, GateStarted) and event.gate.value == "build":
        seen["build"] = time.monotonic()
    if isinstance(event, GateFinished):
        seen["last_gate"] = time.monotonic()  # the lease goes with the evaluation's close, right after
    if isinstance(event, DeviceWait):
        seen["waits"].append(event.holder)
v = evaluate(load_problem(sys.argv[1]), load_solution(sys.argv[2]), Settings(device="cuda"), events=sink)
seen["end"] = time.monotonic()
print(json.dumps({**seen, "status": v.status.value, "waited": v.phases.get("device_wait", 0.0)}))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_two_evaluations_on_one_gpu_take_turns():
    from conftest import FIXTURES

    args = [str(FIXTURES / "problems" / "scale"), str(FIXTURES / "solutions" / "good.py")]
    procs = [subprocess.Popen([sys.executable, "-c", EVALUATE, *args], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    runs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    assert [r["status"] for r in runs] == ["correct", "correct"]
    first, second = sorted(runs, key=lambda r: r["build"])
    # the second's gates that use the GPU began only once the first had finished its last
    assert first["last_gate"] < second["build"], runs
    assert second["waits"] and second["waited"] > 0 and not first["waits"]


def test_gpu_tests_spread_over_the_listed_gpus_one_xdist_worker_each(monkeypatch):
    """ROOFTOP_TEST_GPUS: pytest-xdist's worker gwN sees the GPU at place N of the list (conftest
    does this at import, before it imports torch)."""
    import conftest

    monkeypatch.setenv("ROOFTOP_TEST_GPUS", "5, 7")
    for worker, gpu in (("gw0", "5"), ("gw1", "7"), ("gw2", "5")):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        conftest._spread_over_gpus()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == gpu
    monkeypatch.delenv("PYTEST_XDIST_WORKER")  # not under xdist: nothing is hidden
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    conftest._spread_over_gpus()
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
