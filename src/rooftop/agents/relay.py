"""The agent sandbox's network, from the inside: loopback listeners that lead to the egress proxy.

Run inside the sandbox's network namespace as `python -I -S relay.py SOCKET [--forward HOST:PORT]...
-- COMMAND...`, with the standard library only. It listens on

- a proxy port on 127.0.0.1, whose connections go to the egress proxy (SOCKET) byte for byte, so a
  client's own `CONNECT host:443` decides the target: the command gets HTTPS_PROXY pointing there;
- each forwarded loopback endpoint's own port, so that a base URL such as http://127.0.0.1:8123
  keeps working: the relay asks the proxy for that endpoint, then passes bytes through;

then runs COMMAND and exits as it did. The proxy outside decides what is reachable; the relay
only carries bytes, so a command that replaces it gains nothing.
"""

import os
import signal
import socket
import subprocess
import sys
import threading

ADDRESSES = {"127.0.0.1": socket.AF_INET, "::1": socket.AF_INET6}


def pipe(a, b):
    def copy(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    other = threading.Thread(target=copy, args=(b, a), daemon=True)
    other.start()
    copy(a, b)
    other.join()
    a.close()
    b.close()


def upstream(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def serve(listener, handle):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=handle, args=(client,), daemon=True).start()


def proxied(path):
    def handle(client):
        try:
            pipe(client, upstream(path))
        except OSError:
            client.close()
    return handle


def forwarded(path, target):
    def handle(client):
        try:
            out = upstream(path)
            out.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = out.recv(1)  # byte by byte: nothing past the head is read here
                if not chunk:
                    break
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                sys.stderr.write(f"rooftop relay: {target}: {head.decode('latin-1').splitlines()[:1]}\n")
                client.close()
                out.close()
                return
            pipe(client, out)
        except OSError:
            client.close()
    return handle


def listen(host, port):
    family = ADDRESSES.get(host, socket.AF_INET)
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((host, port))
    s.listen(64)
    return s


def main(argv):
    path, rest = argv[0], argv[1:]
    split = rest.index("--")
    options, command = rest[:split], rest[split + 1:]
    targets = [options[i + 1] for i, flag in enumerate(options) if flag == "--forward"]
    proxy = listen("127.0.0.1", 0)
    threading.Thread(target=serve, args=(proxy, proxied(path)), daemon=True).start()
    for target in targets:
        port = int(target.rpartition(":")[2])
        for host in ADDRESSES:  # "localhost" may be either family
            try:
                listener = listen(host, port)
            except OSError:
                continue  # no IPv6 in this namespace
            threading.Thread(target=serve, args=(listener, forwarded(path, target)), daemon=True).start()
    url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    env = dict(os.environ)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        env[name] = url
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        sys.stderr.write(f"rooftop relay: could not start {command[0]}: {exc.strerror}\n")
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, frame: child.send_signal(number))
    code = child.wait()
    if code < 0:  # die of the same signal, so that the sandbox reports it as the command's own
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
