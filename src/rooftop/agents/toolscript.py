"""The text of `./check` and `./bench`: a small stdlib-only client of the run's gateway.

It is copied into the workspace with the gateway's socket and its tool written in, so that it
runs with any interpreter the agent has and imports nothing an agent could have shadowed. It
names its tool and prints what the gateway answers: the gateway reads the solution from the
workspace itself (`solution.py`, and any sources under `kernels/`), as the final grade does.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = '''#!{python}
"""{summary}

Usage: ./{tool}        (rooftop reads solution.py and kernels/ from this workspace)
"""
import json, socket, sys

TOOL = {tool!r}
SOCKET = {socket!r}


def main():
    request = {{"tool": TOOL}}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(SOCKET)
    except OSError as exc:
        sys.exit("./" + TOOL + ": rooftop is not reachable (" + str(exc) + "); the run may be over")
    conn.sendall(json.dumps(request).encode() + b"\\n")
    conn.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    try:
        answer = json.loads(data)
    except ValueError:
        sys.exit("./" + TOOL + ": no answer from rooftop")
    sys.stdout.write(answer.get("text", ""))
    sys.stdout.flush()
    sys.exit(int(answer.get("exit", 1)))


main()
'''

SUMMARIES = {
    "check": "Correctness of your solution on the visible shapes, through rooftop's engine.",
    "bench": "Correctness, then time, speedup over the reference and fraction of the hardware roof, "
             "on the visible shapes.",
}


def tool_script(tool: str, socket_path: Path, python: str | None = None) -> str:
    return SCRIPT.format(python=python or sys.executable, summary=SUMMARIES[tool], tool=tool, socket=str(socket_path))
