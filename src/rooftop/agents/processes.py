"""Ending an agent's processes: its process group (TERM, then KILL), and what it left behind in
sessions of its own, found by the marker in their environment."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """TERM to the agent's process group, then KILL once the grace period is over."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def kill_group(pgid: int) -> None:
    """SIGKILL to a process group, gone or not."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_marked(marker: str, ident: str) -> int:
    """Kill every process of this user whose environment carries `marker=ident`: what an agent left
    behind in a session of its own (no process group reaches it)."""
    needle = f"{marker}={ident}".encode()
    killed = 0
    for _ in range(3):  # a dying parent may still fork once
        found = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    if needle not in f.read().split(b"\0"):
                        continue
                os.kill(int(entry.name), signal.SIGKILL)
                found += 1
            except (OSError, ValueError):
                continue
        killed += found
        if not found:
            break
        time.sleep(0.05)
    return killed


def feed(proc: subprocess.Popen[bytes], text: str) -> None:
    """Write `text` to a process's stdin and close it (a process that has gone reads nothing)."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except OSError:
        pass
