"""The child's channel: one JSON object per line over a pipe, in each direction, with nothing of
torch in it (the trusted side starts a child before it imports torch).

The trusted side reads with a deadline, so a child that hangs costs at most the gate's timeout,
and caps a line's length, so a child cannot exhaust its memory by writing without end.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any

from pydantic import BaseModel

MAX_LINE = 16 << 20


class ChannelWriter:
    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", buffering=1)

    def send(self, kind: str, **payload: Any) -> None:
        self.write(json.dumps({"type": kind, **payload}, default=str))

    def write(self, line: str) -> None:
        """One message already serialised as a single line of JSON."""
        self._file.write(line + "\n")
        self._file.flush()

    def send_model(self, message: BaseModel) -> None:
        """A pydantic message, written by pydantic (a fifth of json.dumps's time on a call's reply);
        the replies keep NaN and infinities as the constants the reader's json accepts
        (pipeline/wire.py)."""
        self.write(message.model_dump_json())


class ChannelReader:
    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self.closed = False

    def receive(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None at the deadline or when the child closed the pipe."""
        while b"\n" not in self._buffer:
            if self.closed:
                return None
            if len(self._buffer) > MAX_LINE:
                return {"type": "garbled", "text": f"a message longer than {MAX_LINE} bytes"}
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                self.closed = True
                if not self._buffer:
                    return None
                self._buffer += b"\n"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {"type": "garbled", "text": line[:200].decode(errors="replace")}
        if isinstance(message, dict):
            return message
        return {"type": "garbled", "text": line[:200].decode(errors="replace")}
