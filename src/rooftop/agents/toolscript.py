"""The text of `./check` and `./bench`: a small stdlib-only client of the run's gateway.

It is copied into the workspace with the gateway's socket and its tool written in, so that it
runs with any interpreter the agent has and imports nothing an agent could have shadowed. It
sends the solution's files (`solution.py`, and any sources under `kernels/`) as the agent sees
them inside its sandbox, and prints what the gateway answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = '''#!{python}
"""{summary}

Usage: ./{tool}        (from the workspace: sends solution.py and kernels/ to rooftop)
"""
import base64, json, os, socket, sys

TOOL = {tool!r}
SOCKET = {socket!r}
SUFFIXES = {suffixes!r}


def files():
    out = {{}}
    if not os.path.isfile("solution.py"):
        sys.exit("./" + TOOL + ": no solution.py in " + os.getcwd() + " (run me from the workspace)")
    with open("solution.py", "rb") as f:
        out["solution.py"] = f.read()
    for root, dirs, names in os.walk("kernels"):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if os.path.splitext(name)[1] in SUFFIXES:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    out[path.replace(os.sep, "/")] = f.read()
    return out


def main():
    request = {{"tool": TOOL, "files": {{k: base64.b64encode(v).decode() for k, v in files().items()}}}}
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
    from rooftop.solution.loader import SOURCE_SUFFIXES

    return SCRIPT.format(python=python or sys.executable, summary=SUMMARIES[tool], tool=tool,
                         socket=str(socket_path), suffixes=sorted(SOURCE_SUFFIXES))
