"""What the fake agent CLIs do in a workspace, whichever real CLI's output they imitate.

The model name picks the behaviour (see `MODES`); each behaviour is a list of tool calls the fake
"model" makes, one model call each, and the fake CLI renders them in its own CLI's format.
Standard library only: the fakes run under whatever Python the agent sandbox offers.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

MODES = ("honest", "wrong", "probe", "sleep", "stubborn", "orphan", "crash", "forger", "net")

TUNED = "# tuned\n"
# whatever the problem, the output stops matching the reference (a tuple output fails outright)
WRONG = """
_fake_forward = ModelNew.forward


def _fake_wrong_forward(self, *args, **kwargs):
    out = _fake_forward(self, *args, **kwargs)
    return out * 2 + 1


ModelNew.forward = _fake_wrong_forward
"""
ORPHAN_TOKEN = "rooftop-orphan"


class Step(NamedTuple):
    tool: str  # "edit" (a change to a file) or "shell" (a command line)
    target: str  # the file edited, or the command line run
    text: str  # for an edit, what is appended
    run: Callable[[], tuple[str, int]]  # does it: output and exit status


def mode_of(model: str | None) -> str:
    """The behaviour a model name picks; a stubborn fake ignores SIGTERM from here on, before it
    writes a line that could tell a test it has started."""
    mode = model if model in MODES else "honest"
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return mode


def append(path: Path, text: str) -> tuple[str, int]:
    with path.open("a") as out:
        out.write(text if text.startswith("\n") else "\n" + text)
    return f"appended {len(text)} characters to {path.name}", 0


def run_tool(cwd: Path, name: str) -> tuple[str, int]:
    try:
        done = subprocess.run([str(cwd / name)], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=1800)
    except OSError as exc:
        return f"{name}: {exc.strerror}", 127
    return done.stdout.decode(errors="replace"), done.returncode


def _outcome(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno in errno.errorcode:
        return f"denied: {errno.errorcode[exc.errno]}"
    return f"denied: {type(exc).__name__}"


PROBE_FILE = "fake-probe-written"  # the test looks for it on the host side


def _paths(variable: str) -> list[str]:
    return [p for p in os.environ.get(variable, "").split(os.pathsep) if p]


def probe(cwd: Path) -> tuple[str, int]:
    """Try to read each of FAKE_PROBE_PATHS (a file's bytes, a folder's listing) and to write to each
    of FAKE_WRITE_PATHS (a new file in a folder, or an existing file opened for writing); write what
    happened to probe.json, and the environment seen to env.json."""
    found: dict[str, str] = {}
    for path in _paths("FAKE_PROBE_PATHS"):
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as source:
                    source.read(1 << 16)
            found[path] = "ok"
        except Exception as exc:  # noqa: BLE001 - any failure is what the probe reports
            found[path] = _outcome(exc)
    for path in _paths("FAKE_WRITE_PATHS"):
        try:
            if os.path.isfile(path):  # an existing file: opened for writing, left unchanged
                with open(path, "ab"):
                    pass
            else:  # a folder: a new file in it, left there (ENOENT where the folder is not there)
                with open(os.path.join(path, PROBE_FILE), "w") as made:
                    made.write("probe\n")
            found[path] = "ok"
        except Exception as exc:  # noqa: BLE001
            found[path] = _outcome(exc)
    (cwd / "probe.json").write_text(json.dumps(found, indent=1))
    (cwd / "env.json").write_text(json.dumps(dict(os.environ), indent=1))
    return json.dumps(found), 0


def _get(host: str, port: int, via_proxy: bool) -> str:
    """GET / from host:port, directly or through a CONNECT to $HTTPS_PROXY; the status line or the error."""
    import socket
    from urllib.parse import urlsplit

    try:
        if via_proxy:
            proxy = urlsplit(os.environ["HTTPS_PROXY"])
            conn = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
            conn.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            head = conn.recv(4096).decode("latin-1")
            if not head.startswith("HTTP/1.1 200"):
                return "proxy: " + head.splitlines()[0]
        else:
            conn = socket.create_connection((host, port), timeout=10)
        conn.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        reply = b""
        while chunk := conn.recv(4096):
            reply += chunk
        return reply.decode("latin-1").splitlines()[0] + " " + reply.decode("latin-1").rpartition("\r\n")[2]
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        return _outcome(exc)


def net(cwd: Path) -> tuple[str, int]:
    """Try each of FAKE_NET_TARGETS (host:port) directly and through the proxy, and resolve a name;
    write what happened to net.json."""
    import socket

    found: dict[str, str] = {}
    for target in os.environ.get("FAKE_NET_TARGETS", "").split(","):
        host, _, port = target.rpartition(":")
        found[f"direct {target}"] = _get(host, int(port), False)
        found[f"proxy {target}"] = _get(host, int(port), True) if "HTTPS_PROXY" in os.environ else "no proxy"
    try:
        found["dns"] = str(socket.getaddrinfo("pypi.org", 443)[0][4])
    except Exception as exc:  # noqa: BLE001
        found["dns"] = _outcome(exc)
    (cwd / "net.json").write_text(json.dumps(found, indent=1))
    return json.dumps(found), 0


def start_orphan() -> tuple[str, int]:
    """A grandchild in its own session that outlives the agent unless someone kills it."""
    token = os.environ.get("FAKE_ORPHAN_TOKEN", ORPHAN_TOKEN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", token],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    return f"started {child.pid} ({token})", 0


def forge(home: Path) -> tuple[str, int]:
    """Leave files in the CLI's session folder for the harness to collect: links to a file outside
    (FAKE_SECRET_PATH) and to its folder, and forged copies of the run's own records."""
    projects = home / ".claude" / "projects" / "p"
    projects.mkdir(parents=True, exist_ok=True)
    secret = os.environ.get("FAKE_SECRET_PATH")
    if secret:
        (projects / "leak.jsonl").symlink_to(secret)
        (projects.parent / "linked").symlink_to(Path(secret).parent, target_is_directory=True)
    (projects / "transcript.jsonl").write_text(json.dumps({"type": "result", "forged": True}) + "\n")
    (projects / "calls.jsonl").write_text(json.dumps({"tool": "check", "speedup": 50.0}) + "\n")
    return "left session files", 0


def plan(mode: str, cwd: Path) -> list[Step]:
    """The tool calls of one behaviour; `sleep`, `stubborn` and `crash` make none."""
    check = Step("shell", "./check", "", lambda: run_tool(cwd, "check"))
    bench = Step("shell", "./bench", "", lambda: run_tool(cwd, "bench"))
    honest = [Step("edit", "solution.py", TUNED, lambda: append(cwd / "solution.py", TUNED)), check, bench]
    if mode == "wrong":
        return [Step("edit", "solution.py", WRONG, lambda: append(cwd / "solution.py", WRONG)), check]
    if mode == "probe":
        return [Step("shell", "probe", "", lambda: probe(cwd)), *honest]
    if mode == "net":
        return [Step("shell", "net", "", lambda: net(cwd))]
    if mode == "forger":
        return [*honest, Step("shell", "forge", "", lambda: forge(Path.home()))]
    if mode == "orphan":
        return [Step("shell", "sleep 3600 &", "", start_orphan), *honest]
    if mode in ("sleep", "stubborn", "crash"):
        return []
    return honest


def hang() -> None:
    """Never finish (a stubborn fake, see `mode_of`, then ends only by SIGKILL)."""
    while True:
        time.sleep(3600)


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()
