"""A cgroup for each evaluation child: the kernel bounds its tree's host memory and process count.

The tree watchdog (integrity/watchdog.py) looks at /proc ten times a second. Between two looks a
candidate can touch gigabytes, a fork storm can outrun the look on a machine with few cores, and
a tree that thrashes just under the limit is never stopped. A memory cgroup's limit is enforced
at every page the tree charges (its processes, its tmpfs files) and a pids cgroup's at every fork.

They need a hierarchy this user may write: cgroup v1's memory and pids hierarchies (root, as in a
container), or on cgroup v2 a cgroup of this process's whose children get the memory and pids
controllers (a delegated subtree). Where neither is offered, the watchdog alone bounds the tree
and `make` says why, for the verdict to say so. The watchdog stays on either way: it reads this
cgroup's counters on each look, kills what is left of a tree that hit a limit and says which.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids")


@dataclass
class ChildCgroup:
    folders: dict[str, Path]  # controller -> its cgroup folder (one folder for both on v2)
    version: int
    memory_bytes: int | None
    processes: int | None

    @classmethod
    def make(cls, memory_bytes: int | None, processes: int | None,
             root: Path = ROOT, own: str | None = None) -> tuple[ChildCgroup | None, str]:
        """A fresh cgroup below this process's own with the limits set, or (None, why not)."""
        lines = own if own is not None else _read(Path("/proc/self/cgroup"))
        name = f"rooftop-{os.getpid()}-{secrets.token_hex(4)}"
        v1 = _v1_paths(lines)
        why_v1 = "no cgroup v1 memory and pids hierarchies"
        if all(c in v1 and (root / c).is_dir() for c in CONTROLLERS):
            folders = {c: root / c / v1[c].lstrip("/") / name for c in CONTROLLERS}
            made = _made(cls(folders, 1, memory_bytes, processes))
            if isinstance(made, ChildCgroup):
                return made, ""
            why_v1 = made
        unified = next((line.split(":", 2)[2] for line in lines.splitlines() if line.startswith("0::")), None)
        if unified is None or not (root / "cgroup.controllers").exists():
            return None, f"{why_v1}, and no cgroup v2 hierarchy at {root}"
        parent = root / unified.lstrip("/")
        enabled = _read(parent / "cgroup.subtree_control").split()
        missing = [c for c in CONTROLLERS if c not in enabled]
        if missing:
            try:
                (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
            except OSError as exc:
                return None, (f"{why_v1}, and this process's cgroup v2 ({unified}) does not give its children the "
                              f"{' and '.join(missing)} controllers ({exc.strerror or exc}); run rooftop in a "
                              "delegated cgroup (systemd-run --user --scope -p Delegate=yes …) for kernel bounds")
        made = _made(cls({c: parent / name for c in CONTROLLERS}, 2, memory_bytes, processes))
        return (made, "") if isinstance(made, ChildCgroup) else (None, f"{why_v1}; cgroup v2: {made}")

    def join(self) -> None:
        """Move the calling process into the cgroup: run in the child between fork and exec, so that
        everything it starts (bwrap, the interpreter, compilers, a fork storm) is bounded from birth."""
        for folder in dict.fromkeys(self.folders.values()):
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def breach(self) -> str | None:
        """Which limit the tree hit, from the kernel's counters (None while it hit none)."""
        memory, pids = self.folders["memory"], self.folders["pids"]
        killed = _counter(memory / ("memory.events" if self.version == 2 else "memory.oom_control"), "oom_kill")
        if killed and self.memory_bytes:
            return (f"[memory] the candidate's processes reached the limit of {self.memory_bytes / 2**30:.1f} GiB of "
                    "host memory (a memory cgroup) and the kernel killed them")
        if _counter(pids / "pids.events", "max") and self.processes:
            return f"[processes] the candidate ran more than {self.processes} processes at once (a pids cgroup): killed"
        return None

    def members(self) -> list[int]:
        found: set[int] = set()
        for folder in dict.fromkeys(self.folders.values()):
            found.update(int(p) for p in _read(folder / "cgroup.procs").split() if p.isdigit())
        return sorted(found)

    def remove(self) -> None:
        """Kill whatever is left in it, then remove it (a cgroup goes once its last process is reaped)."""
        deadline = time.monotonic() + 2.0
        for folder in dict.fromkeys(self.folders.values()):
            while folder.exists():
                for pid in self.members():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    folder.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)


def _made(group: ChildCgroup) -> ChildCgroup | str:
    """The cgroup made and limited, or why not (anything half made is removed)."""
    try:
        for folder in dict.fromkeys(group.folders.values()):
            _sweep(folder.parent)
            folder.mkdir()
        memory, pids = group.folders["memory"], group.folders["pids"]
        if group.memory_bytes:
            limit = str(group.memory_bytes)
            if group.version == 1:
                (memory / "memory.limit_in_bytes").write_text(limit)
                if (memory / "memory.memsw.limit_in_bytes").exists():  # swap counted too: no escape to swap
                    (memory / "memory.memsw.limit_in_bytes").write_text(limit)
            else:
                (memory / "memory.max").write_text(limit)
                if (memory / "memory.swap.max").exists():
                    (memory / "memory.swap.max").write_text("0")
        if group.processes:
            (pids / "pids.max").write_text(str(group.processes))
    except OSError as exc:
        group.remove()
        return f"{exc.filename or 'a cgroup'} could not be made or limited ({exc.strerror or exc})"
    return group


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups of rooftop processes that are gone (one killed before it could)."""
    from rooftop.integrity.reaper import alive

    try:
        stale = [f for f in parent.glob("rooftop-*-*") if not alive(int(f.name.split("-")[1]))]
    except (OSError, ValueError):
        return
    for folder in stale:
        try:
            folder.rmdir()
        except OSError:
            pass


def _v1_paths(lines: str) -> dict[str, str]:
    """This process's cgroup per v1 controller, from /proc/self/cgroup ("4:memory:/path")."""
    found = {}
    for line in lines.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1]:
            for controller in parts[1].split(","):
                found[controller] = parts[2]
    return found


def _counter(path: Path, key: str) -> int:
    for line in _read(path).splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
