"""The server's two ASGI middlewares, which answer before anything parses a request: the bearer
token (401, the body drained unread) and the body's size (413, declared or streamed)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from rooftop.service.jobs import MAX_SOURCE_BYTES

API = "/v1"
MAX_REQUEST_BYTES = MAX_SOURCE_BYTES + (64 << 10)  # a solution's code and the JSON around it
UNAUTHORIZED = "authorization: expected 'Bearer <token>'"
DRAIN_BYTES = 16 * MAX_REQUEST_BYTES  # read and dropped before a refusal, so that the client gets it, not a reset
OPEN_PATHS = (f"{API}/health", "/docs", "/openapi.json", "/redoc")  # no token asked, no body read


def token_ok(token: str | None, authorization: str | None) -> bool:
    """Whether a request's Authorization header carries the server's bearer token (any does without one)."""
    if token is None:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.encode(), token.encode())


class Authorized:
    """401 before anything reads the body: an unauthenticated request's body is drained unread
    (at most DRAIN_BYTES, never kept), so that no caller without the token costs the server memory."""

    def __init__(self, app: Callable[..., Awaitable[None]], token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            return await self.app(scope, receive, send)
        header = dict(scope.get("headers") or []).get(b"authorization")
        if token_ok(self.token, header.decode("latin-1") if header is not None else None):
            return await self.app(scope, receive, send)
        await _drain(receive)
        await _refuse(send, 401, UNAUTHORIZED, [(b"www-authenticate", b"Bearer")])


async def _drain(receive: Callable[[], Awaitable[dict[str, Any]]], seen: int = 0) -> None:
    """Read what is left of a request's body, up to DRAIN_BYTES in all, and drop it."""
    await _read_body(receive, 0, seen)


async def _read_body(receive: Callable[[], Awaitable[dict[str, Any]]], keep: int,
                     seen: int = 0) -> tuple[list[bytes], int]:
    """A request's body as it streams in: its chunks while they add up to at most `keep` bytes;
    past that, what follows is read and dropped up to DRAIN_BYTES in all (so the client can read
    the answer), and no chunk is kept. The chunks and the bytes seen."""
    chunks: list[bytes] = []
    while seen <= max(keep, DRAIN_BYTES):
        message = await receive()
        if message["type"] != "http.request":
            break
        body = message.get("body", b"")
        seen += len(body)
        if seen <= keep:
            chunks.append(body)
        if not message.get("more_body", False):
            break
    return (chunks if seen <= keep else []), seen


class BodyLimit:
    """413 for a request body over `limit` bytes, declared or streamed, before anything parses it:
    a body without a declared length is read here (at most `limit` bytes) and handed on whole."""

    def __init__(self, app: Callable[..., Awaitable[None]], limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                if declared.isdigit() and int(declared) <= DRAIN_BYTES:
                    await _drain(receive)
                return await _too_large(self.limit, send)
            return await self.app(scope, receive, send)
        chunks, seen = await _read_body(receive, self.limit)
        if seen > self.limit:
            return await _too_large(self.limit, send)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


async def _too_large(limit: int, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    await _refuse(send, 413, f"request body: larger than {limit} bytes")


async def _refuse(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, error: str,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A one-line JSON error sent from a middleware, as the app's own handlers write them."""
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
