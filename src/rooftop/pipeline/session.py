"""One evaluation child, seen from the trusted side: start it, ask it things, end it.

Every request carries a fresh random id and is answered by exactly one reply echoing it; the
reply is validated against its schema. Anything else on the channel — a message nobody asked
for, a wrong id, an unreadable or oversized line — ends the evaluation as a protocol violation.
A child that stays silent past the deadline is killed; one that dies is reported with its signal
or exit status and the tail of its log.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rooftop.integrity.sandbox import SandboxPlan
from rooftop.pipeline.channel import ChannelReader
from rooftop.pipeline.protocol import Hello, Reply


class ChildGone(Exception):
    """The child did not answer as asked: `kind` is timeout, crash or protocol."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(message or kind)
        self.kind, self.message = kind, message


class ChildSession:
    def __init__(self, sandbox: SandboxPlan, job_path: Path, scratch: Path, log_path: Path) -> None:
        self.scratch, self.log_path, self.sandbox = scratch, log_path, sandbox
        request_read, self._request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*sandbox.prefix, sys.executable, "-m", "rooftop.pipeline.child", str(job_path),
                 str(request_read), str(reply_write)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(request_read, reply_write), env=sandbox.env, cwd=scratch, start_new_session=True,
                preexec_fn=sandbox.limits.apply)
        os.close(request_read)
        os.close(reply_write)
        self._reply_read = reply_read
        self.reader = ChannelReader(reply_read)

    def hello(self, deadline: float) -> Hello:
        message = self._receive(deadline)
        try:
            return Hello.model_validate(message)
        except ValidationError:
            raise ChildGone("protocol", f"expected the child's greeting, got {_short(message)}")

    def request(self, op: str, deadline: float, **fields: Any) -> tuple[Reply, float]:
        """Send one request; its validated reply and the trusted wall time the round trip took."""
        request_id = secrets.token_hex(8)
        started = time.perf_counter()
        try:
            os.write(self._request_write, (json.dumps({"op": op, "id": request_id, **fields}) + "\n").encode())
        except OSError:
            raise ChildGone("crash")
        message = self._receive(deadline)
        wall = time.perf_counter() - started
        try:
            reply = Reply.model_validate(message)
        except ValidationError:
            raise ChildGone("protocol", f"expected the reply to '{op}', got {_short(message)}")
        if reply.id != request_id:
            raise ChildGone("protocol", f"a reply to '{op}' carried the wrong request id: it was not written by "
                            "the harness in answer to this request")
        return reply, wall

    def _receive(self, deadline: float) -> dict[str, Any]:
        message = self.reader.receive(deadline)
        if message is None:
            raise ChildGone("crash" if self.reader.closed else "timeout")
        if message.get("type") == "garbled":
            raise ChildGone("protocol", f"unreadable message on the channel: {message.get('text', '')}")
        return message

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
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])[-1500:]

    def close(self) -> None:
        try:
            os.write(self._request_write, b'{"op": "quit", "id": "-"}\n')
        except OSError:
            pass
        for fd in (self._request_write, self._reply_read):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=0.5)
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


def _short(message: Any) -> str:
    text = json.dumps(message, default=str)
    return text if len(text) < 160 else text[:160] + "…"
