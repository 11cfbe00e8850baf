"""`rooftop serve`: the environment API and plain evaluations over HTTP (server/app.py)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Annotated

import typer

from rooftop import config
from rooftop.cli.common import DbOpt, Device, DeviceOpt, Sandbox, SandboxOpt, TimeoutOpt, err, settings_from_options
from rooftop.errors import UserError


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)


def serve_command(
    host: Annotated[str, typer.Option("--host", help="address to listen on (beyond the loopback interface a "
                                      "token is required)")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    token_file: Annotated[Path | None, typer.Option("--token-file", metavar="FILE",
                                                    help="file holding the bearer token clients must send "
                                                    "(else $ROOFTOP_TOKEN)")] = None,
    device: DeviceOpt = Device.auto,
    timeout: TimeoutOpt = None,
    sandbox: SandboxOpt = Sandbox.auto,
    workers: Annotated[int | None, typer.Option("--workers", min=1, metavar="N", help="device workers (default: "
                                                "one per GPU; on a CPU, 1)")] = None,
    builders: Annotated[int | None, typer.Option("--builders", min=1, metavar="N", help="build workers (default: "
                                                 "one per core beside the device workers', at most 64)")] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, metavar="N",
                                           help="tool calls per session unless it asks for fewer")] = 8,
    idle: Annotated[float, typer.Option("--idle", min=1.0, metavar="SECONDS",
                                        help="sessions untouched this long are reaped")] = 1800.0,
    db: DbOpt = Path("rooftop.db"),
) -> None:
    """Serve the environment (sessions, tool calls) and evaluations over HTTP; see /docs."""
    token = _token(token_file)
    if token is None and not _loopback(host):
        raise UserError(f"--host {host}: listening beyond the loopback interface needs a token "
                        "(--token-file FILE or $ROOFTOP_TOKEN)")
    settings = settings_from_options(device, "auto", timeout, None, True, sandbox)
    from rooftop.integrity.sandbox import require_isolation

    require_isolation(settings.sandbox, "rooftop serve")
    from rooftop.pipeline.evaluate import resolve_device
    from rooftop.server.app import ServerConfig, create_app
    from rooftop.store.db import Store

    Store(db).close()  # a bad --db is reported here, before the server starts
    config = ServerConfig(db=db, device=resolve_device(settings.device), token=token, settings=settings,
                          idle_seconds=idle, max_turns=max_turns, workers=workers, builders=builders)
    import uvicorn

    err.print(f"rooftop serve: http://{host}:{port}/v1 on {config.device}, results in {db}"
              + ("" if token else " (no token: loopback only)"))
    if settings.sandbox == "none":
        err.print("rooftop serve: warning: no sandbox (--sandbox none): every candidate runs with this user's files "
                  "and network, and its verdict says so")
    uvicorn.run(create_app(config), host=host, port=port, log_level="warning")


def _token(path: Path | None) -> str | None:
    from rooftop.integrity.environ import withdraw

    # out of this process's environment and memory before any worker starts: the workers, their builds
    # and children inherit what is left, and a candidate without a sandbox can read /proc/<pid>/environ
    from_env = withdraw(config.TOKEN)
    if path is not None:
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise UserError(f"--token-file {path}: cannot read it ({exc.strerror})") from None
        if not token:
            raise UserError(f"--token-file {path}: the file is empty")
        return token
    return from_env or None


def _loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one ('localhost' included)."""
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        raise UserError(f"--host {host}: not an address this machine can listen on") from None
    return all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
