"""The agent sandbox's only way out: a CONNECT proxy on a unix socket that reaches listed endpoints.

Under bubblewrap an agent gets a network namespace of its own, holding nothing but a loopback
interface: no rooftop server, no other run's gateway, no host service on 127.0.0.1, no DNS. The
relay inside the sandbox (`relay.py`) hands each of its connections to this proxy through a socket
file bound into the sandbox, and the proxy opens a TCP connection only to a `host:port` the run's
config lists (its model's API). Anything else gets a 403, and is named in the run's record.

    with Egress(["api.anthropic.com:443", "127.0.0.1:8123"]) as egress:
        ... bind egress.folder, run relay.py egress.socket ...
    egress.refused  # ["10.0.0.7:8000"]
"""

from __future__ import annotations

import shutil
import socket
import socketserver
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

from rooftop.agents.relay import pipe  # one byte pump, stdlib-only, for both ends

HEAD_BYTES = 8192  # a CONNECT request's head is one line and a few headers
CONNECT_TIMEOUT_S = 15.0
MAX_REFUSED = 100  # named in the record; past this only counted
DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint(text: str) -> str:
    """`host:port` from "host:port" or an http(s) URL; ValueError names what was expected."""
    text = text.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"{text!r} is not an http(s) URL or host:port")
        host, port = parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme]
    else:
        host, sep, digits = text.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not digits.isdigit() or not 0 < int(digits) < 65536:
            raise ValueError(f"{text!r} is not host:port (e.g. api.anthropic.com:443) or an http(s) URL")
        port = int(digits)
    return f"[{host.lower()}]:{port}" if ":" in host else f"{host.lower()}:{port}"


def is_loopback(target: str) -> bool:
    host = target.rpartition(":")[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def split(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return host.strip("[]"), int(port)


class Egress:
    """The proxy, serving in a thread while the run lasts."""

    def __init__(self, allowed: list[str]) -> None:
        self.allowed = sorted({endpoint(a) for a in allowed})
        self.refused: list[str] = []
        self.opened: dict[str, int] = {}
        self.folder = self.socket = Path()
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingUnixStreamServer | None = None

    def __enter__(self) -> Egress:
        egress = self
        self.folder = Path(tempfile.mkdtemp(prefix="rooftop-net-"))  # short: socket paths are limited
        self.socket = self.folder / "egress.sock"

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                egress._serve(self.request)

        self._server = socketserver.ThreadingUnixStreamServer(str(self.socket), Handler)
        self._server.daemon_threads = True
        self.socket.chmod(0o777)  # the sandbox's user is this one; the folder is ours alone
        threading.Thread(target=self._server.serve_forever, name="rooftop-egress", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(CONNECT_TIMEOUT_S)
        try:
            head, early = _read_head(client)
        except OSError:
            return
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target = rest.partition(" ")[0]
        try:
            target = endpoint(target) if method.upper() == "CONNECT" else ""
        except ValueError:
            target = ""
        if not target:
            _reply(client, 405, "only CONNECT host:port is served: set HTTPS_PROXY, or list a loopback endpoint")
            return
        if target not in self.allowed:
            with self._lock:
                if len(self.refused) < MAX_REFUSED and target not in self.refused:
                    self.refused.append(target)
            _reply(client, 403, f"{target} is not among this run's endpoints ({', '.join(self.allowed) or 'none'})")
            return
        try:
            upstream = socket.create_connection(split(target), timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:
            _reply(client, 502, f"{target}: {exc.strerror or exc}")
            return
        with self._lock:
            self.opened[target] = self.opened.get(target, 0) + 1
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if early:  # sent before the 200 came: the tunnel's first bytes
            upstream.sendall(early)
        client.settimeout(None)
        upstream.settimeout(None)
        pipe(client, upstream)


def _read_head(client: socket.socket) -> tuple[bytes, bytes]:
    """The request's head, and whatever came after it in the same reads."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(1024)
        if not chunk or len(head) > HEAD_BYTES:
            raise ConnectionError("no request head")
        head += chunk
    head, _, early = head.partition(b"\r\n\r\n")
    return head, early


def _reply(client: socket.socket, status: int, why: str) -> None:
    body = (why + "\n").encode()
    reason = {403: "Forbidden", 405: "Method Not Allowed", 502: "Bad Gateway"}[status]
    try:
        client.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
                       f"Connection: close\r\n\r\n".encode() + body)
    except OSError:
        pass
    client.close()
