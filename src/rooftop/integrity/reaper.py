"""The parent of an unsandboxed evaluation child: its whole tree ends when the process that started
it ends, however that one ends.

bwrap gives a sandboxed child a pid namespace that dies with its parent. Without bwrap
(`--sandbox none`) the child gets PR_SET_PDEATHSIG, but its own children do not inherit it: a
worker killed with SIGKILL left nvcc, cc1plus and cudafe++ running for minutes. This process sits
between the two. It is a child subreaper (a descendant whose parent dies is handed to it, not to
init), it asks for SIGTERM when its own parent dies, and on that signal, or when the child exits,
it kills every descendant it has. It exits as the child did (the same status, or the same signal),
so the trusted side reads the child's end as before.

It runs as a script with the standard library alone (`python -I -S reaper.py PARENT -- COMMAND…`),
so it costs a few milliseconds to start and imports nothing a candidate could have touched.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def tree(root: int) -> list[int]:
    """`root` and its descendants, read from /proc (each task's `children`; empty when `root` is
    gone). The watchdog walks a child's tree with it too."""
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        found.append(pid)
        for tid in tids:
            try:
                todo += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            except (OSError, ValueError):
                pass
    return found


def kill_all() -> None:
    """SIGKILL every descendant until none is left (one that forks while it is killed included)."""
    for _ in range(50):
        left = tree(os.getpid())[1:]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        time.sleep(0.01)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: reaper.py PARENT_PID -- COMMAND [ARG...]")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != int(argv[0]):  # the starter died before the signal was asked for
        sys.exit(1)

    def end(signum: int, _frame: object) -> None:
        kill_all()
        os._exit(128 + signum)

    for sig in ENDING:
        signal.signal(sig, end)
    child = os.fork()
    if child == 0:
        for sig in ENDING:
            signal.signal(sig, signal.SIG_DFL)
        try:
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))  # the child dies with this process too
            os.execvp(argv[2], argv[2:])
        finally:
            os._exit(127)
    # the channel's descriptors belong to the child: held here too, a dead child's pipes would never close
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 4096)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == child:
            break
    kill_all()
    if os.WIFSIGNALED(status):
        died_of = os.WTERMSIG(status)
        signal.signal(died_of, signal.SIG_DFL)
        os.kill(os.getpid(), died_of)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])


def alive(pid: int) -> bool:
    """Whether a process of this id exists (a zombie too, until it is reaped)."""
    return Path(f"/proc/{pid}").exists()
