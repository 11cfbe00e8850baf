"""A scripted model on loopback that speaks three providers' wire APIs, for driving real agent CLIs.

    with ScriptedModel(coding_script(SOLUTION), api_key="sk-k") as model:
        # Claude Code: ANTHROPIC_BASE_URL=model.root; Codex and opencode: base URL model.url (…/v1)
        ...
    model.requests  # every request it got, in order (`Seen`)

- Anthropic Messages: `POST /v1/messages` (SSE when `stream`: message_start, content_block_start /
  delta / stop, message_delta, message_stop), `POST /v1/messages/count_tokens`;
- OpenAI Responses: `POST /v1/responses` (SSE: response.created, response.output_item.added /
  done, response.output_text.delta, response.function_call_arguments.delta, response.completed);
- OpenAI Chat Completions: `POST /v1/chat/completions` (chunks with `tool_calls` deltas when
  `stream`, then `[DONE]`);
- `GET /v1/models` in both providers' shapes; any other path is recorded and answered 404.

Each request is read into a provider-neutral `Turn` (the tools offered, the tool results so far,
all its text) and the script answers it with an `Action`: say something (ending the turn) or use
one tool. A script that advances on the tool results present in the request, as `coding_script`
does, is not thrown off by the side requests a CLI makes (titles, quota probes, token counts).
Every reply costs `INPUT_TOKENS` in and `OUTPUT_TOKENS` out.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from fakes.openai_server import LoopbackServer

INPUT_TOKENS, OUTPUT_TOKENS = 1000, 50
MODEL = "scripted-1"


@dataclass
class Tool:
    name: str
    kind: str  # "function" (JSON arguments), "custom" (free-form text input), or the provider's own type
    params: dict[str, Any] = field(default_factory=dict)  # the JSON schema's properties


@dataclass
class Turn:
    """One model request, whatever the provider."""

    api: str  # "anthropic", "responses" or "chat"
    model: str
    tools: dict[str, Tool]
    results: list[str]  # the tool results in the conversation so far, oldest first
    text: str  # every text in the request (system prompt, messages, results), joined

    @property
    def workspace(self) -> str | None:
        """The working directory the CLI told its model about (an absolute path ending /workspace)."""
        found = re.search(r"(/[\w.+\-/]+/workspace)(?![\w.+\-])", self.text)
        return found.group(1) if found else None


@dataclass
class Say:
    text: str


@dataclass
class Use:
    tool: str
    arguments: dict[str, Any] | str  # a custom tool's input is plain text
    note: str | None = None  # text said before the call, in the same reply


Action = Say | Use
Script = Callable[[Turn], Action]


@dataclass
class Seen:
    api: str | None  # None: a path this server does not serve
    method: str
    path: str
    headers: dict[str, str]
    body: Any


# -- reading requests --------------------------------------------------------------------------
def _text(value: Any) -> str:
    """The text in a content value: a string, or a list of blocks with `text` (or nested `content`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, dict):
        return _text(value.get("text") if "text" in value else value.get("content") or value.get("output") or "")
    return ""


def anthropic_turn(body: dict[str, Any]) -> Turn:
    tools = {t["name"]: Tool(t["name"], "function" if "input_schema" in t else str(t.get("type")),
                             (t.get("input_schema") or {}).get("properties") or {})
             for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t}
    results, texts = [], [_text(body.get("system"))]
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append(_text(block.get("content")))
            texts.append(_text(block) if not isinstance(block, dict) or block.get("type") != "tool_use"
                         else json.dumps(block.get("input")))
    return Turn("anthropic", str(body.get("model")), tools, results, "\n".join(texts))


def responses_turn(body: dict[str, Any]) -> Turn:
    tools = {}
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        name = str(t.get("name") or t.get("type"))
        kind = t.get("type") if t.get("type") in ("function", "custom") else str(t.get("type"))
        tools[name] = Tool(name, str(kind), (t.get("parameters") or {}).get("properties") or {})
    results, texts = [], [_text(body.get("instructions"))]
    items = body.get("input")
    for item in items if isinstance(items, list) else [{"type": "message", "content": items}]:
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            results.append(_text(item.get("output")))
        texts.append(_text(item.get("content")) or _text(item.get("output")) or str(item.get("arguments") or ""))
    return Turn("responses", str(body.get("model")), tools, results, "\n".join(texts))


def chat_turn(body: dict[str, Any]) -> Turn:
    tools = {}
    for t in body.get("tools") or []:
        function = t.get("function") if isinstance(t, dict) else None
        if isinstance(function, dict) and "name" in function:
            tools[function["name"]] = Tool(function["name"], "function",
                                           (function.get("parameters") or {}).get("properties") or {})
    results, texts = [], []
    for message in body.get("messages") or []:
        if message.get("role") == "tool":
            results.append(_text(message.get("content")))
        texts.append(_text(message.get("content")))
        texts += [str(c.get("function", {}).get("arguments")) for c in message.get("tool_calls") or []]
    return Turn("chat", str(body.get("model")), tools, results, "\n".join(texts))


# -- writing replies ---------------------------------------------------------------------------
def _sse(events: Iterator[tuple[str | None, Any]]) -> Iterator[bytes]:
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        payload = data if isinstance(data, str) else json.dumps(data)
        yield f"{head}data: {payload}\n\n".encode()


def _halves(text: str) -> list[str]:
    """A text in two deltas, as a stream would cut it (one, if it is short)."""
    middle = len(text) // 2
    return [text[:middle], text[middle:]] if middle else [text]


def _arguments(action: Use) -> str:
    return action.arguments if isinstance(action.arguments, str) else json.dumps(action.arguments)


def anthropic_message(action: Action, n: int, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    note = action.text if isinstance(action, Say) else action.note
    if note:
        content.append({"type": "text", "text": note})
    if isinstance(action, Use):
        content.append({"type": "tool_use", "id": f"toolu_scripted_{n}", "name": action.tool,
                        "input": action.arguments})
    return {"id": f"msg_scripted_{n}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "tool_use" if isinstance(action, Use) else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def anthropic_stream(action: Action, n: int, model: str) -> Iterator[tuple[str | None, Any]]:
    message = anthropic_message(action, n, model)
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": t}
                                                             for t in _halves(block["text"])]
        else:
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(json.dumps(block["input"]))]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opened}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta", "usage": {"output_tokens": OUTPUT_TOKENS},
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None}}
    yield "message_stop", {"type": "message_stop"}


def responses_output(action: Action, n: int, tools: dict[str, Tool]) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    note = action.text if isinstance(action, Say) else action.note
    if note:
        output.append({"type": "message", "id": f"msg_scripted_{n}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": note, "annotations": []}]})
    if isinstance(action, Use):
        tool = tools.get(action.tool)
        if tool is not None and tool.kind == "custom":
            output.append({"type": "custom_tool_call", "id": f"ctc_scripted_{n}", "call_id": f"call_scripted_{n}",
                           "name": action.tool, "input": _arguments(action), "status": "completed"})
        else:
            output.append({"type": "function_call", "id": f"fc_scripted_{n}", "call_id": f"call_scripted_{n}",
                           "name": action.tool, "arguments": _arguments(action), "status": "completed"})
    return output


def responses_object(action: Action, n: int, model: str, tools: dict[str, Tool], status: str) -> dict[str, Any]:
    done = status == "completed"
    return {"id": f"resp_scripted_{n}", "object": "response", "created_at": int(time.time()), "status": status,
            "model": model, "output": responses_output(action, n, tools) if done else [],
            "usage": {"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS} if done else None}


def responses_stream(action: Action, n: int, model: str, tools: dict[str, Tool]) -> Iterator[tuple[str | None, Any]]:
    sequence = itertools.count()

    def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(sequence), **fields}

    yield event("response.created", response=responses_object(action, n, model, tools, "in_progress"))
    yield event("response.in_progress", response=responses_object(action, n, model, tools, "in_progress"))
    for index, item in enumerate(responses_output(action, n, tools)):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                        part=part)
            for piece in _halves(text):
                yield event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                            delta=piece)
            yield event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=text)
            yield event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part={**part, "text": text})
        elif item["type"] == "function_call":
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "arguments": ""})
            for piece in _halves(item["arguments"]):
                yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                            delta=piece)
            yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                        arguments=item["arguments"])
        else:
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "input": ""})
            for piece in _halves(item["input"]):
                yield event("response.custom_tool_call_input.delta", item_id=item["id"], output_index=index,
                            delta=piece)
            yield event("response.custom_tool_call_input.done", item_id=item["id"], output_index=index,
                        input=item["input"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=responses_object(action, n, model, tools, "completed"))


def chat_message(action: Action, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant",
                               "content": action.text if isinstance(action, Say) else action.note}
    if isinstance(action, Use):
        message["tool_calls"] = [{"id": f"call_scripted_{n}", "type": "function",
                                  "function": {"name": action.tool, "arguments": _arguments(action)}}]
    return message


def _chat_usage() -> dict[str, int]:
    return {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}


def chat_stream(action: Action, n: int, model: str) -> Iterator[tuple[str | None, Any]]:
    head = {"id": f"chatcmpl-scripted-{n}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    message = chat_message(action, n)
    yield chunk({"role": "assistant", "content": ""})
    for piece in _halves(message["content"] or ""):
        if piece:
            yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        pieces = _halves(call["function"]["arguments"])
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"], "arguments": pieces[0]}}]})
        for piece in pieces[1:]:
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if isinstance(action, Use) else "stop")
    yield None, {**head, "choices": [], "usage": _chat_usage()}
    yield None, "[DONE]"


# -- the server --------------------------------------------------------------------------------
class ScriptedModel(LoopbackServer):
    """Serves `script` over the three APIs; with `api_key`, a request without it (as `x-api-key`
    or a bearer token) is answered 401."""

    def __init__(self, script: Script, *, api_key: str | None = None, model: str = MODEL) -> None:
        super().__init__()
        self.script, self.api_key, self.model = script, api_key, model
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    @property
    def root(self) -> str:
        """The base URL without /v1 (Anthropic's clients add it themselves)."""
        return self.url.removesuffix("/v1")

    def calls(self, api: str) -> list[Seen]:
        return [seen for seen in self.requests if seen.api == api]

    def _authorised(self, request: Request) -> bool:
        if self.api_key is None:
            return True
        return self.api_key in (request.headers.get("x-api-key"),
                                request.headers.get("authorization", "").removeprefix("Bearer "))

    async def _take(self, api: str | None, request: Request) -> tuple[Any, int]:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        with self._lock:
            self.requests.append(Seen(api, request.method, request.url.path, dict(request.headers), body))
            return body, next(self._ids)

    def _app(self) -> FastAPI:
        app = FastAPI()
        denied = JSONResponse({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}, 401)

        @app.get("/v1/models")
        async def models(request: Request) -> dict[str, Any]:
            await self._take("models", request)
            entry = {"id": self.model, "object": "model", "type": "model", "owned_by": "tests",
                     "display_name": self.model, "created": 0, "created_at": "2025-01-01T00:00:00Z"}
            return {"object": "list", "data": [entry], "has_more": False, "first_id": self.model,
                    "last_id": self.model}

        @app.post("/v1/messages/count_tokens")
        async def count_tokens(request: Request) -> Response:
            await self._take("count_tokens", request)
            return denied if not self._authorised(request) else JSONResponse({"input_tokens": INPUT_TOKENS})

        @app.post("/v1/messages")
        async def messages(request: Request) -> Response:
            body, n = await self._take("anthropic", request)
            if not self._authorised(request):
                return denied
            action = self.script(anthropic_turn(body))
            model = str(body.get("model") or self.model)
            if body.get("stream"):
                return StreamingResponse(_sse(anthropic_stream(action, n, model)), media_type="text/event-stream")
            return JSONResponse(anthropic_message(action, n, model))

        @app.post("/v1/responses")
        async def responses(request: Request) -> Response:
            body, n = await self._take("responses", request)
            if not self._authorised(request):
                return denied
            turn = responses_turn(body)
            action, model = self.script(turn), str(body.get("model") or self.model)
            if body.get("stream"):
                return StreamingResponse(_sse(responses_stream(action, n, model, turn.tools)),
                                         media_type="text/event-stream")
            return JSONResponse(responses_object(action, n, model, turn.tools, "completed"))

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body, n = await self._take("chat", request)
            if not self._authorised(request):
                return denied
            action, model = self.script(chat_turn(body)), str(body.get("model") or self.model)
            if body.get("stream"):
                return StreamingResponse(_sse(chat_stream(action, n, model)), media_type="text/event-stream")
            finish = "tool_calls" if isinstance(action, Use) else "stop"
            return JSONResponse({"id": f"chatcmpl-scripted-{n}", "object": "chat.completion",
                                 "created": int(time.time()), "model": model, "usage": _chat_usage(),
                                 "choices": [{"index": 0, "message": chat_message(action, n),
                                              "finish_reason": finish}]})

        @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"])
        async def elsewhere(request: Request, path: str) -> Response:
            await self._take(None, request)
            return JSONResponse({"error": {"message": f"no /{path} here", "type": "not_found_error"}}, 404)

        return app


# -- the coding agent's script -------------------------------------------------------------------
SIDE_ANSWER = "Scripted session"  # a request offering no tools: a title, a summary, a quota probe
SHELLS = ("Bash", "bash", "exec_command", "shell_command", "shell", "local_shell")


def _path_key(tool: Tool) -> str:
    return next((k for k in ("file_path", "filePath", "path") if k in tool.params), "file_path")


def _place(turn: Turn, name: str) -> str:
    return f"{turn.workspace}/{name}" if turn.workspace else name


def shell(turn: Turn, command: str, why: str) -> Use:
    """`command` through the shell tool the request offers, in the argument shape its schema asks for."""
    name = next((n for n in SHELLS if n in turn.tools), None)
    if name is None:
        raise AssertionError(f"no shell tool among {sorted(turn.tools)}")
    params = turn.tools[name].params
    arguments: dict[str, Any]
    if "cmd" in params:
        arguments = {"cmd": command}
    elif params.get("command", {}).get("type") == "array" or name == "local_shell":
        arguments = {"command": ["bash", "-lc", command]}
    else:
        arguments = {"command": command}
    if "description" in params:
        arguments["description"] = why
    # the command's whole run, however loaded the machine: Codex's exec_command otherwise hands back
    # a still-running ./check after its 10 s yield time
    for key in ("yield_time_ms", "timeout_ms", "timeout"):
        if key in params:
            arguments[key] = 300_000
    return Use(name, arguments, note=why)


def read(turn: Turn, name: str) -> Use:
    tool = next((turn.tools[n] for n in ("Read", "read") if n in turn.tools), None)
    if tool is None:
        return shell(turn, f"cat {name}", f"Look at {name}")
    return Use(tool.name, {_path_key(tool): _place(turn, name)}, note=f"Reading {name}.")


def write(turn: Turn, name: str, text: str) -> Use:
    tool = next((turn.tools[n] for n in ("Write", "write") if n in turn.tools), None)
    if tool is not None:
        return Use(tool.name, {_path_key(tool): _place(turn, name), "content": text}, note=f"Writing {name}.")
    if "apply_patch" in turn.tools:
        patch = "\n".join(["*** Begin Patch", f"*** Add File: {name}", *(f"+{line}" for line in text.splitlines()),
                           "*** End Patch"])
        patcher = turn.tools["apply_patch"]
        arguments: dict[str, Any] | str = patch if patcher.kind == "custom" else {
            next(iter(patcher.params), "input"): patch}
        return Use("apply_patch", arguments, note=f"Writing {name}.")
    return shell(turn, f"cat > {name} <<'ROOFTOP_EOF'\n{text}ROOFTOP_EOF", f"Write {name}")


def coding_script(solution: str, *, entry: str = "solution.py") -> Script:
    """Read the solution file, write `solution` over it, run ./check, then say what it said: one
    step per tool result in the conversation."""

    def script(turn: Turn) -> Action:
        if not turn.tools:
            return Say(SIDE_ANSWER)
        step = len(turn.results)
        if step == 0:
            return read(turn, entry)
        if step == 1:
            return write(turn, entry, solution)
        if step == 2:
            return shell(turn, "./check", "Run the correctness check")
        status = re.search(r"status: (\w+)", turn.results[-1])
        return Say(f"Done: ./check says {status.group(1) if status else 'nothing I can read'}.")

    return script
