"""Secrets taken out of a trusted process's environment, where its children and readers of /proc
would find them.

A variable the process was started with lives in the initial environment block, which
`/proc/<pid>/environ` shows whatever `os.environ` says later: a candidate run without a sandbox
read the server's token there. `withdraw` unsets the variable (so nothing started later inherits
it) and overwrites its bytes in that block.

A trusted process is also made non-dumpable (`undumpable`): a process of the same user can then
neither read its memory or `/proc/<pid>/environ` nor attach to it with ptrace, which is what a
candidate run without a sandbox would otherwise do to a worker or the server (root still can).
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


PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def undumpable() -> bool:
    """Make this process non-dumpable (no core dump, no ptrace or /proc memory reads by the same
    user); whether it is now. A process started later from it is dumpable again after its exec."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return int(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def withdraw_secrets() -> list[str]:
    """Withdraw every variable whose name looks like a secret (an API key, a token): for a process
    that needs none of them, such as an evaluation worker. The names withdrawn."""
    from rooftop.integrity.sandbox import SECRET_NAME

    names = [name for name in os.environ if SECRET_NAME.search(name)]
    for name in names:
        withdraw(name)
    return names
