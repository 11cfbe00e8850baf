"""One evaluation on a GPU at a time, across every process of the host.

A device worker runs one evaluation at a time, but a second worker on the same GPU, a second
`rooftop batch` or a lone `rooftop eval` would otherwise share it: their kernels would run inside
each other's timed windows, and their memory plans would count the same free memory twice. So an
evaluation on a GPU holds that GPU's lease from the start of its build gate (the child, the trusted
side's model and the memory plan) until it has let everything go: an exclusive `flock` on a file
named by the GPU's UUID (an index changes with CUDA_VISIBLE_DEVICES, the UUID does not), in a
folder every process of the host sees. The kernel drops the lock when its holder dies, so a killed
evaluation never leaves its GPU taken. Processes that do not share that folder (containers with
their own /tmp) do not see each other's leases: give them one with ROOFTOP_LOCKS.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

from rooftop import config
from rooftop.errors import UserError

LOCKS_ENV = config.LOCKS
DEFAULT_FOLDER = Path("/tmp/rooftop-locks")  # not TMPDIR: every process of the host must agree on it
POLL_SECONDS = 0.05


def lock_folder() -> Path:
    """The leases' folder, open to every user's evaluations (sticky, as /tmp is)."""
    folder = Path(config.read(LOCKS_ENV) or DEFAULT_FOLDER)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{LOCKS_ENV}={folder}: cannot make the GPU leases' folder there ({exc.strerror})")
    try:
        os.chmod(folder, 0o1777)
    except PermissionError:  # another user's, who made it so already
        pass
    return folder


def gpu_identity() -> str:
    """The UUID of this process's current GPU."""
    import torch

    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    return f"gpu-{uuid}" if uuid is not None else f"gpu-{props.name}-{index}".replace(" ", "_")


class DeviceLease:
    """The exclusive lease of one device, named by `key`; `acquire` waits for it."""

    def __init__(self, key: str, folder: Path | None = None) -> None:
        self.key = key
        self.path = (folder or lock_folder()) / f"{key}.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, check: Callable[[], None] | None = None, on_wait: Callable[[str], None] | None = None) -> float:
        """Take the lease, waiting while another process holds it; the seconds waited. `check` runs
        between tries (it raises to give up, e.g. on cancellation); `on_wait` is told once who
        holds it."""
        if self._fd is not None:
            return 0.0
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise UserError(f"cannot open the GPU lease {self.path} ({exc.strerror}); set {LOCKS_ENV} to a folder "
                            "every rooftop process of this host can write") from None
        started, told = time.monotonic(), False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if on_wait is not None and not told:
                        told = True
                        on_wait(self.holder())
                    if check is not None:
                        check()
                    time.sleep(POLL_SECONDS)
        except BaseException:
            os.close(fd)
            raise
        _chmod_shared(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}\n".encode(), 0)
        self._fd = fd
        return time.monotonic() - started

    def holder(self) -> str:
        """Who holds the lease, as its holder wrote it ("" if unknown)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _chmod_shared(fd: int) -> None:
    """Let every user's evaluations open the file (the umask narrowed it when it was made)."""
    try:
        os.fchmod(fd, 0o666)
    except PermissionError:  # another user made it, and left it open to all
        pass
