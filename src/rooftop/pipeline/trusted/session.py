"""One evaluation child, seen from the trusted side: start it, ask it things, end it.

Every request carries a fresh random id and is answered by exactly one reply of the same `op`
echoing it; the reply is validated against its model. Anything else on the channel — a message
nobody asked for, a wrong id, an unreadable or oversized line — is a protocol violation. A child
that stays silent past the deadline is killed; one that dies is reported with its signal or
exit status and the tail of its log. Every way of losing the child is a `GateFailed` with `lost`
set, which the gate runner words with the gate and shape it was in.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from rooftop.integrity.cgroup import ChildCgroup
from rooftop.integrity.sandbox import SandboxPlan
from rooftop.integrity.watchdog import TreeWatchdog
from rooftop.pipeline.channel import ChannelReader
from rooftop.verdict import GateFailed, Status

if TYPE_CHECKING:  # the protocol's models import torch; a child is started before this process does
    from rooftop.pipeline.wire import Request, _Reply

R = TypeVar("R", bound="_Reply")


QUIT_GRACE = 0.1  # seconds a child that was asked to quit may take before it is killed
LOG_TAIL_BYTES = 64 << 10  # what is read of a dead child's log for its last lines

class ChildSession:
    def __init__(self, sandbox: SandboxPlan, scratch: Path, log_path: Path) -> None:
        self.scratch, self.log_path, self.sandbox = scratch, log_path, sandbox
        request_read, self._request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        # descriptors of shared memory (check/landing.py) go over a socket: pipes cannot carry them
        self._descriptors, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        limits = sandbox.limits
        # the kernel's bounds on the child's tree where a cgroup can be made; the watchdog's otherwise
        self.cgroup, self.unbounded = ChildCgroup.make(limits.memory_bytes, limits.processes)
        joined = self.cgroup

        def enter() -> None:  # in the child, before it runs anything
            if joined is not None:
                joined.join()
            limits.apply()

        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*sandbox.prefix, sys.executable, "-m", "rooftop.pipeline.child", str(request_read), str(reply_write),
                 str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(request_read, reply_write, theirs.fileno()), env=sandbox.env, cwd=scratch,
                start_new_session=True, preexec_fn=enter)
        self.watchdog = TreeWatchdog(self.proc.pid, limits.memory_bytes, limits.processes, self.cgroup,
                                     disk=sandbox.writable, disk_bytes=limits.disk_bytes).start()
        os.close(request_read)
        os.close(reply_write)
        theirs.close()
        self._reply_read = reply_read
        self.reader = ChannelReader(reply_read)
        self._greeted = False

    def hello(self, deadline: float) -> None:
        """Wait until the child is up (a no-op once it greeted)."""
        if self._greeted:
            return
        from rooftop.pipeline.wire import Hello

        message = self._receive(deadline)
        try:
            Hello.model_validate(message)
        except ValidationError:
            raise GateFailed(Status.rejected, f"expected the child's greeting, got {_short(message)}", lost="protocol")
        self._greeted = True

    def send_descriptor(self, fd: int) -> None:
        """Hand the child a descriptor (it reads it when a request names what it is for)."""
        try:
            socket.send_fds(self._descriptors, [b"d"], [fd])
        except OSError:
            raise self._lost()

    def request(self, request: Request, expect: type[R], deadline: float) -> tuple[R, float]:
        """Send one request; its validated reply and the trusted wall time the round trip took."""
        from rooftop.pipeline.wire import REPLIES

        self.hello(deadline)
        op = request.op
        request.id = secrets.token_hex(8)
        started = time.perf_counter()
        try:
            os.write(self._request_write, (request.model_dump_json() + "\n").encode())
        except OSError:
            raise self._lost()
        message = self._receive(deadline)
        wall = time.perf_counter() - started
        try:
            reply = REPLIES.validate_python(message)
        except ValidationError:
            raise GateFailed(Status.rejected, f"expected the reply to '{op}', got {_short(message)}", lost="protocol")
        if not isinstance(reply, expect) or reply.id != request.id:
            raise GateFailed(Status.rejected, f"a reply to '{op}' carried the wrong request id or kind: it was not "
                             "written by the harness in answer to this request", lost="protocol")
        return reply, wall

    def _receive(self, deadline: float) -> dict[str, Any]:
        message = self.reader.receive(deadline)
        if message is None:
            if self.reader.closed:
                raise self._lost()
            raise GateFailed(Status.timeout, lost="timeout")
        if message.get("type") == "garbled":
            raise GateFailed(Status.rejected, f"unreadable message on the channel: {message.get('text', '')}",
                             lost="protocol")
        return message

    def _lost(self) -> GateFailed:
        """The failure for a child that died. Death by SIGSYS is the seal's seccomp filter killing
        it for reaching for the sealed timer's pages (integrity/seal.py): a rejection, not a crash."""
        how, tail = self._death()
        if how == f"was killed by {signal.SIGSYS.name}":
            return GateFailed(Status.rejected, "[sealed] the solution's process tried to change, unmap or replace "
                              "the sealed timer's memory, or to write another process's memory (ptrace, "
                              "process_vm_writev), and the seccomp filter killed it with SIGSYS"
                              + (f"; its last output:\n{tail}" if tail else ""))
        return GateFailed(None, how, tail, lost="crash")

    def _death(self) -> tuple[str, str]:
        how = self.exit_description()
        # it may not have died: it may have been killed for what it took
        return self.watchdog.kernel_breach() or how, self.log_tail()

    def exit_description(self) -> str:
        """How the child ended, once its channel closed: a signal or an exit status."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "closed its channel"
        if self.sandbox.kind.value == "bwrap" and 128 < code < 128 + 65:
            code = 128 - code  # bwrap reports its child's death by signal N as exit status 128 + N
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def log_tail(self, lines: int = 12) -> str:
        """The end of the child's log. Only its last bytes are read: a candidate may have written
        gigabytes there (up to the file-size limit), which must not be loaded into this process."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])[-1500:]

    def close(self) -> None:
        from rooftop.pipeline.wire import QuitRequest

        try:
            os.write(self._request_write, (QuitRequest(id="-").model_dump_json() + "\n").encode())
        except OSError:
            pass
        for fd in (self._request_write, self._reply_read):
            try:
                os.close(fd)
            except OSError:
                pass
        self._descriptors.close()
        self._stop()

    def _stop(self) -> None:
        self.watchdog.stop()
        # a child has nothing to save once its last reply is read: it gets a moment to leave on its
        # own, then is killed (a CUDA process's orderly exit takes half a second of the verdict)
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=QUIT_GRACE)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None and self.sandbox.kind.value == "none":
            self.proc.terminate()  # the reaper kills the child's tree, those that left its group too
            try:
                self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        if self.cgroup is not None:
            self.cgroup.remove()


def _short(message: Any) -> str:
    text = json.dumps(message, default=str)
    return text if len(text) < 160 else text[:160] + "…"
