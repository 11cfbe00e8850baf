"""The kernel's bounds on a child's tree (integrity/cgroup.py): made where a hierarchy is writable,
said why not where none is, and read back as the limit that was hit."""

import subprocess
import sys
import time

import pytest

from rooftop.integrity.cgroup import ChildCgroup


def _made(memory_bytes: int, processes: int) -> ChildCgroup:
    group, why = ChildCgroup.make(memory_bytes, processes)
    if group is None:
        pytest.skip(f"no cgroup can be made here: {why}")
    return group


def test_a_tree_past_its_memory_is_killed_by_the_kernel_and_the_breach_says_so():
    group = _made(256 << 20, 64)
    try:
        proc = subprocess.Popen([sys.executable, "-c", "x = bytearray(1 << 30); print(len(x))"],
                                preexec_fn=group.join, stdout=subprocess.PIPE)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == -9 and out == b""
        breach = group.breach()
        assert breach is not None and breach.startswith("[memory]") and "0.2 GiB" in breach
    finally:
        group.remove()
    assert not any(folder.exists() for folder in group.folders.values())


def test_a_tree_cannot_fork_past_its_process_limit():
    group = _made(1 << 30, 8)
    try:
        proc = subprocess.Popen(["bash", "-c", "for i in $(seq 20); do sleep 30 & done; wait"],
                                preexec_fn=group.join, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if group.breach():
                break
            time.sleep(0.05)
        assert len(group.members()) <= 8
        breach = group.breach()
        assert breach is not None and breach.startswith("[processes]") and "8 processes" in breach
    finally:
        group.remove()  # kills the sleepers too
    assert proc.wait(timeout=10) == -9


def test_where_no_hierarchy_is_writable_the_reason_is_given(tmp_path):
    group, why = ChildCgroup.make(1 << 30, 8, root=tmp_path, own="0::/user.slice/session-1.scope\n")
    assert group is None and "no cgroup v1 memory and pids hierarchies" in why and "v2" in why
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    group, why = ChildCgroup.make(1 << 30, 8, root=tmp_path, own="0::/user.slice/session-1.scope\n")
    assert group is None and "does not give its children" in why and "Delegate=yes" in why
