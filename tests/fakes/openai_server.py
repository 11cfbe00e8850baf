"""A scripted OpenAI-compatible chat-completions server on loopback, speaking real HTTP.

    def script(request: dict) -> Reply: ...          # or a list of replies, served in order
    with ScriptedLLM(script) as llm:
        client = openai.OpenAI(base_url=llm.url, api_key="k")

A reply is plain text, or a tool call, or both; every response carries a usage block so token
accounting can be checked. Every request body is kept (`llm.requests`) for assertions.

`LoopbackServer` is the HTTP part alone (a FastAPI app under uvicorn on 127.0.0.1, an ephemeral
port); `model_apis.ScriptedModel` builds on it to speak the providers' own APIs.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 100
    completion_tokens: int = 20
    status: int = 200  # anything else: an error response with this HTTP status


Script = Callable[[dict[str, Any]], Reply] | list[Reply]


class LoopbackServer:
    """A FastAPI app (`_app`, made by the subclass) served on 127.0.0.1 while the `with` lasts:
    `port` and `url` (its /v1 root) are known once entered."""

    def __init__(self) -> None:
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.url = ""

    def _app(self) -> FastAPI:
        raise NotImplementedError

    def __enter__(self) -> Self:
        import uvicorn

        self._server = uvicorn.Server(uvicorn.Config(self._app(), host="127.0.0.1", port=0, log_level="error"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the scripted {type(self).__name__} server did not start")
            time.sleep(0.02)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)


class ScriptedLLM(LoopbackServer):
    def __init__(self, script: Script, *, api_key: str | None = None, model: str = "scripted-1") -> None:
        super().__init__()
        self.script, self.api_key, self.model = script, api_key, model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def _reply(self, body: dict[str, Any]) -> Reply:
        if callable(self.script):
            return self.script(body)
        if not self.script:
            return Reply(content="(the script has run out)")
        return self.script.pop(0)

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "tests"}]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            with self._lock:
                self.requests.append(body)
                self.headers.append(dict(request.headers))
                if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
                    return JSONResponse({"error": {"message": "bad key", "type": "invalid_request_error"}}, 401)
                reply = self._reply(body)
                n = next(self._ids)
            if reply.status != 200:
                return JSONResponse({"error": {"message": reply.content or "scripted error", "type": "server_error"}},
                                    reply.status)
            message: dict[str, Any] = {"role": "assistant", "content": reply.content}
            if reply.tool_calls:
                message["tool_calls"] = [
                    {"id": f"call_{n}_{i}", "type": "function",
                     "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for i, c in enumerate(reply.tool_calls)]
            return JSONResponse({
                "id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", self.model),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
                "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                          "total_tokens": reply.prompt_tokens + reply.completion_tokens}})

        return app
