"""Secrets taken out of a trusted process's environment, where its children and readers of /proc
would find them.

A variable the process was started with lives in the initial environment block, which
`/proc/<pid>/environ` shows whatever `os.environ` says later: a candidate run without a sandbox
read the server's token there. `withdraw` unsets the variable (so nothing started later inherits
it) and overwrites its bytes in that block.
"""

from __future__ import annotations

import ctypes
import os


def withdraw(name: str) -> str | None:
    """The variable's value, after it is gone from this process's environment and its memory."""
    value = os.environ.get(name)
    if value is None:
        return None
    prefix = name.encode() + b"="
    found: list[tuple[int, int]] = []
    try:
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
        i = 0
        while environ[i]:
            text = ctypes.string_at(environ[i])
            if text.startswith(prefix):
                found.append((int(environ[i]), len(text)))
            i += 1
    except (OSError, ValueError):  # no C library to read: the variable is still unset below
        found = []
    os.environ.pop(name, None)  # unsetenv: later children do not inherit it
    for address, length in found:
        ctypes.memset(address, 0, length)
    return value
