"""A watchdog over a child's process tree: host memory and process count, which no setrlimit
bounds for a whole tree (RLIMIT_AS is per process and breaks CUDA's address-space reservations;
RLIMIT_NPROC does not bind root). A candidate that takes the host's memory or forks without end
is killed, with why, before the machine and the verdicts of other workers suffer.

The tree is read from /proc (each task's `children`), a few small reads per process every tenth
of a second; the thread sleeps between looks, so it takes nothing from a timing worth measuring.
What it cannot stop is an exponential fork bomb on a machine with few cores: thousands of
spinning processes starve the watching thread of the CPU before its next look. A pids cgroup (or
RLIMIT_NPROC for a user other than root) is what bounds that.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from rooftop.integrity.reaper import alive, tree

if TYPE_CHECKING:
    from rooftop.integrity.cgroup import ChildCgroup

PAGE = os.sysconf("SC_PAGE_SIZE")
EVERY = 0.1  # seconds between looks
DISK_EVERY = 10  # looks between two walks of the folders the child writes
DISK_MOST = 16 << 30  # bytes a child's files may take in all (file by file, RLIMIT_FSIZE bounds them at 4 GiB)
MAX_FILES = 200_000  # files and folders it may make (a walk of that many takes a fraction of a second)


def host_memory_bytes() -> int:
    return PAGE * os.sysconf("SC_PHYS_PAGES")


def available_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return host_memory_bytes()


def default_memory_limit() -> int:
    """Half the host's memory and three quarters of what is available when the child starts, at
    most 64 GiB: room for the trusted side, the other workers and the system, on a laptop as on a
    GPU server, before the kernel's own OOM killer picks a victim."""
    return min(host_memory_bytes() // 2, available_memory_bytes() * 3 // 4, 64 << 30)


def default_disk_limit(folder: Path) -> int:
    """Half the free space where the child writes, at most 16 GiB: a CUDA extension's build takes
    tens of megabytes, and a candidate's files must leave the disk to the machine and its other
    workers."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return DISK_MOST
    return min(free // 2, DISK_MOST)


def disk_used(folders: list[Path], most_files: int) -> tuple[int, int]:
    """Bytes allocated to the files under `folders` (links not followed, sparse holes not counted)
    and how many entries there are, the walk stopping past `most_files`."""
    used = entries = 0
    todo = list(folders)
    while todo and entries <= most_files:
        try:
            with os.scandir(todo.pop()) as found:
                for entry in found:
                    entries += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(Path(entry.path))
                        elif entry.is_file(follow_symlinks=False):
                            used += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
        except OSError:
            pass
    return used, entries


class TreeWatchdog:
    def __init__(self, root: int, memory_bytes: int | None, processes: int | None,
                 cgroup: ChildCgroup | None = None, disk: list[Path] | None = None,
                 disk_bytes: int | None = None) -> None:
        self.root, self.memory_bytes, self.processes = root, memory_bytes, processes
        self.cgroup = cgroup  # the kernel's bounds on the same tree, whose counters each look reads
        # the host folders the child may write (its scratch, its build folder) and their total bound
        self.disk, self.disk_bytes = disk or [], disk_bytes
        self.breach: str | None = None  # why the tree was killed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"rooftop-watchdog-{root}", daemon=True)

    def start(self) -> TreeWatchdog:
        if self.memory_bytes or self.processes or self.disk_bytes:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def kernel_breach(self) -> str | None:
        """The limit the tree's cgroup hit, if any (also read once the child is found dead: it may
        have died of it between two looks)."""
        if self.breach is None and self.cgroup is not None:
            self.breach = self.cgroup.breach()
        return self.breach

    def _watch(self) -> None:
        looks = 0
        while not self._stop.wait(EVERY):
            looks += 1
            pids = tree(self.root)
            if not pids:
                return
            if self.disk_bytes and self.disk and looks % DISK_EVERY == 0:
                used, entries = disk_used(self.disk, MAX_FILES)
                if used > self.disk_bytes or entries > MAX_FILES:
                    what = f"more than {MAX_FILES:,} files and folders" if entries > MAX_FILES else \
                        f"{used / 2**30:.1f} GiB of files, over the limit of {self.disk_bytes / 2**30:.1f} GiB,"
                    self._kill(pids, f"[disk] the candidate wrote {what} in its scratch and build folders: killed")
                    return
            if self.kernel_breach():  # what the kernel left of a tree it stopped goes too
                self._kill(pids, self.breach or "")
                return
            if self.processes and len(pids) > self.processes:
                self._kill(pids, f"[processes] the candidate ran more than {self.processes} processes at once: "
                                 "killed")
                return
            # resident pages, summed, count a forked page once per process: an upper bound, read
            # cheaply; only past the limit is the proportional share (PSS) read, which is exact
            if self.memory_bytes and sum(resident_bytes(p) for p in pids) > self.memory_bytes:
                used = sum(proportional_bytes(p) for p in pids)
                if used > self.memory_bytes:
                    self._kill(pids, f"[memory] the candidate's processes held {used / 2**30:.1f} GiB of host "
                                     f"memory, over the limit of {self.memory_bytes / 2**30:.1f} GiB: killed")
                    return

    def _kill(self, pids: list[int], why: str) -> None:
        self.breach = why
        for _ in range(20):  # a tree that forks while it is killed: kill what appeared since
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            pids = tree(self.root) if alive(self.root) else []
            if not pids:
                return


def resident_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def proportional_bytes(pid: int) -> int:
    """The process's proportional set size: each page divided among the processes sharing it."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) << 10
    except (OSError, IndexError, ValueError):
        pass
    return resident_bytes(pid)

