"""The HTTP server under 64 concurrent sessions: latency of the API itself, and errors.

A real `rooftop serve` process on loopback, with a token. Each of `--sessions` clients loops for
`--seconds`: create a session, read it, list the deck's tasks, call `run_kernel` with a solution
whose verdict is already in the store (the same code is the same job, so no evaluation runs and
what is timed is the API: validation, the store, the episode, the view), call `finish` (it grades
that same job, also stored), and delete the session. One evaluation before the clock starts puts
the two verdicts in the store. Every request's latency is recorded, and every non-2xx answer is
an error.

    python benchmarks/server_sessions.py [--sessions 64] [--seconds 30] [--device cpu] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TASK = "examples/layernorm"
SOLUTION = ROOT / "problems/examples/layernorm/solutions/pytorch_layernorm.py"
TOKEN = "benchmark-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: Path, device: str, port: int) -> subprocess.Popen:
    env = {**os.environ, "ROOFTOP_TOKEN": TOKEN}
    return subprocess.Popen([sys.executable, "-m", "rooftop", "serve", "--port", str(port), "--device", device,
                             "--db", str(db)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def wait_up(client: httpx.AsyncClient, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if (await client.get("/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise SystemExit("the server did not start")


async def warm(client: httpx.AsyncClient, code: str) -> None:
    """One episode that evaluates the code and grades it, so later ones find both verdicts."""
    made = (await client.post("/sessions", json={"task": TASK})).json()
    for body in ({"tool": "run_kernel", "code": code}, {"tool": "finish"}):
        answer = await client.post(f"/sessions/{made['id']}/calls", json=body, timeout=900)
        answer.raise_for_status()
        print(f"warm-up {body['tool']}: {answer.json()['observation'].splitlines()[0]}", file=sys.stderr)


async def session_loop(client: httpx.AsyncClient, code: str, until: float, latencies: dict[str, list[float]],
                       errors: list[str]) -> None:
    async def timed(name: str, method: str, path: str, **kwargs: object) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            answer = await client.request(method, path, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as exc:
            errors.append(f"{name}: {type(exc).__name__}")
            return None
        latencies.setdefault(name, []).append(time.perf_counter() - started)
        if answer.status_code >= 300:
            errors.append(f"{name}: {answer.status_code} {answer.text[:120]}")
            return None
        return answer

    while time.monotonic() < until:
        made = await timed("create session", "POST", "/sessions", json={"task": TASK, "max_turns": 4})
        if made is None:
            continue
        ident = made.json()["id"]
        await timed("get session", "GET", f"/sessions/{ident}")
        await timed("list tasks", "GET", "/tasks", params={"split": "examples"})
        await timed("run_kernel (stored verdict)", "POST", f"/sessions/{ident}/calls",
                    json={"tool": "run_kernel", "code": code})
        await timed("finish (stored verdict)", "POST", f"/sessions/{ident}/calls", json={"tool": "finish"})
        await timed("delete session", "DELETE", f"/sessions/{ident}")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="rooftop-serve-bench-"))
    port = free_port()
    server = start_server(folder / "serve.db", args.device, port)
    code = SOLUTION.read_text()
    limits = httpx.Limits(max_connections=args.sessions + 8, max_keepalive_connections=args.sessions + 8)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/v1", limits=limits, timeout=120,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            await wait_up(client, time.monotonic() + 120)
            await warm(client, code)
            latencies: dict[str, list[float]] = {}
            errors: list[str] = []
            started = time.monotonic()
            until = started + args.seconds
            await asyncio.gather(*(session_loop(client, code, until, latencies, errors)
                                   for _ in range(args.sessions)))
            wall = time.monotonic() - started
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    every = [v for values in latencies.values() for v in values]
    rows = {name: {"n": len(v), "p50_ms": 1e3 * statistics.median(v), "p99_ms": 1e3 * quantile(v, 0.99)}
            for name, v in latencies.items()}
    return {"sessions": args.sessions, "seconds": round(wall, 1), "requests": len(every),
            "requests_per_s": round(len(every) / wall, 1), "errors": len(errors), "first_errors": errors[:5],
            "p50_ms": 1e3 * statistics.median(every) if every else None,
            "p99_ms": 1e3 * quantile(every, 0.99) if every else None, "by_request": rows,
            "device": args.device, "cores": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--device", default="cpu", help="the server's device (its workers run the warm-up only)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    print(f"{result['sessions']} sessions for {result['seconds']} s: {result['requests']} requests "
          f"({result['requests_per_s']}/s), {result['errors']} errors; "
          f"p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms")
    print(f"{'request':32} {'n':>7} {'p50 ms':>8} {'p99 ms':>8}")
    for name, row in result["by_request"].items():  # type: ignore[union-attr]
        print(f"{name:32} {row['n']:>7} {row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f}")
    for error in result["first_errors"]:  # type: ignore[union-attr]
        print("error:", error)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
