"""rooftop's built-in agent: a tool-calling loop over any OpenAI-compatible chat-completions endpoint.

    python -m rooftop.agents.llm --model NAME [--base-url URL] [--max-turns 20] ...

Started by the runner inside the sandbox with the workspace as its working directory. The model
sees PROMPT.md and three tools: `run_kernel` (save solution.py, run ./bench), `read_file` (a file
of the workspace) and `finish`. The transcript goes to stdout, one JSON event per line (see
`rooftop.agents.transcript`); diagnostics go to stderr. Imports stay light (openai, pydantic,
stdlib): this runs in the agent sandbox, far from the engine.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
import traceback
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from types import FrameType
from typing import Any, Literal, NoReturn

import openai

from rooftop.agents.llm_tools import parse_arguments, read_file, run_kernel
from rooftop.agents.transcript import (
    WRITTEN,
    ErrorEvent,
    MessageEvent,
    ResultEvent,
    StartEvent,
    ToolCallRecord,
    TranscriptWriter,
)
from rooftop.transcripts.usage import Usage

PROG = "rooftop.agents.llm"
MAX_BACKOFF_S = 60.0

SYSTEM = """You write fast GPU kernels. The task is in the next message. Your tools:
- run_kernel(code): saves `code` as solution.py in the workspace and runs ./bench on it, which checks \
correctness on the visible shapes and times it; you get its report back.
- read_file(path): reads a file of the workspace, e.g. reference.py or shapes.yaml.
- finish(): ends the session.
The solution.py you last saved is graded on more shapes than the ones you can see, so keep it correct \
and general, not tuned to the visible shapes only. Call finish when you are done."""

NUDGE = ("Please reply with a tool call: run_kernel to try a solution, read_file to look at a file of the "
         "workspace, or finish when you are done.")


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": sorted(properties),
                       "additionalProperties": False}}}


TOOLS = [
    _function("run_kernel", "Save code as solution.py in the workspace and run ./bench on it (correctness and "
              "timing on the visible shapes). Returns the report and the exit status (0: correct).",
              {"code": {"type": "string", "description": "The full contents of solution.py, defining ModelNew."}}),
    _function("read_file", "Read a file of the workspace (a path relative to it).",
              {"path": {"type": "string", "description": "Relative path, e.g. reference.py"}}),
    _function("finish", "End the session; the last solution.py saved is the one graded.", {}),
]


def rooftop_version() -> str:
    try:
        return package_version("rooftop")
    except PackageNotFoundError:
        return "unknown"


class FatalError(Exception):
    """The endpoint refused for good (bad key, bad request, retries spent): the run ends."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Terminated(BaseException):
    """SIGTERM from the runner: end with a result event rather than mid-line."""


# ---- the endpoint ------------------------------------------------------------------------------------------------


def _brief(exc: BaseException, limit: int = 400) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _transient(exc: openai.OpenAIError) -> tuple[bool, int | None]:
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return status in (408, 409, 429) or status >= 500, status
    return isinstance(exc, openai.APIConnectionError), None  # timeouts are connection errors too


def _retry_after(exc: openai.OpenAIError) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    try:
        return min(float(exc.response.headers.get("retry-after", "")), MAX_BACKOFF_S)
    except ValueError:
        return None


def usage_of(response: Any) -> Usage:
    usage = getattr(response, "usage", None)
    if usage is None:
        return Usage()
    extra = usage.model_extra or {}
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    cached = getattr(prompt_details, "cached_tokens", None)
    if cached is None:
        cached = extra.get("prompt_cache_hit_tokens")  # some providers report it here instead
    return Usage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
                 cache_read_tokens=cached if isinstance(cached, int) else None,
                 reasoning_tokens=getattr(completion_details, "reasoning_tokens", None))


# ---- the loop ----------------------------------------------------------------------------------------------------

Reason = Literal["finish", "max_turns", "error", "no_tool_call"]


class Agent:
    def __init__(self, options: argparse.Namespace, client: openai.OpenAI, writer: TranscriptWriter,
                 workspace: Path) -> None:
        self.options, self.client, self.writer, self.workspace = options, client, writer, workspace
        self.messages: list[dict[str, Any]] = []
        self.turns = 0
        self.total = Usage()
        self.started = time.monotonic()

    def say(self, message: dict[str, Any], **record: Any) -> None:
        self.messages.append(message)
        self.writer.emit(MessageEvent(role=message["role"], content=message.get("content"), **record))

    def request(self) -> Any:
        """One model call, transient failures retried with exponential backoff."""
        request: dict[str, Any] = {"model": self.options.model, "messages": self.messages, "tools": TOOLS}
        if self.options.temperature is not None:
            request["temperature"] = self.options.temperature
        if self.options.max_tokens is not None:
            request["max_tokens"] = self.options.max_tokens
        attempt = 0
        while True:
            try:
                response = self.client.chat.completions.create(**request)
                if response.choices:
                    return response
                transient, status, message = True, None, "the response has no choices"
            except openai.OpenAIError as exc:
                transient, status = _transient(exc)
                message = _brief(exc)
                if not transient:
                    raise FatalError(message, status) from None
                delay = _retry_after(exc)
            else:
                delay = None
            if attempt >= self.options.retries:
                raise FatalError(f"{message} (gave up after {attempt + 1} attempts)", status)
            if delay is None:
                delay = min(self.options.backoff * 2 ** attempt, MAX_BACKOFF_S) * (1 + random.random() / 4)
            attempt += 1
            self.writer.emit(ErrorEvent(message=f"{message}; retry {attempt} of {self.options.retries} in "
                                                f"{delay:.1f} s", fatal=False, status=status))
            print(f"{PROG}: {message}; retrying in {delay:.1f} s", file=sys.stderr)
            time.sleep(delay)

    def call_tool(self, name: str, raw: str | None) -> str:
        if name == "finish":
            return "finished"
        if name not in ("run_kernel", "read_file"):
            return f"error: unknown tool '{name}'; the tools are run_kernel, read_file and finish"
        arguments = parse_arguments(raw)
        if isinstance(arguments, str):
            return arguments
        key = "code" if name == "run_kernel" else "path"
        value = arguments.get(key)
        if not isinstance(value, str):
            return f"error: {name} needs a string argument '{key}'"
        if name == "run_kernel":
            return run_kernel(self.workspace, value, timeout=self.options.tool_timeout,
                              hide_env=(self.options.api_key_env,))
        return read_file(self.workspace, value)

    def run(self, prompt: str) -> Reason:
        self.say({"role": "system", "content": SYSTEM})
        self.say({"role": "user", "content": prompt})
        nudged = False
        while self.turns < self.options.max_turns:
            response = self.request()
            self.turns += 1
            usage = usage_of(response)
            self.total = self.total + usage
            message = response.choices[0].message
            extra = message.model_extra or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
            calls = [(call.id or f"call_{self.turns}_{i}", call.function.name, call.function.arguments)
                     for i, call in enumerate(message.tool_calls or []) if getattr(call, "function", None)]
            said: dict[str, Any] = {"role": "assistant", "content": message.content}
            if calls:
                said["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a or ""}}
                                      for i, n, a in calls]
            self.say(said, usage=usage, reasoning=reasoning if isinstance(reasoning, str) else None,
                     tool_calls=[ToolCallRecord(id=i, name=n, arguments=a or "") for i, n, a in calls])
            if not calls:
                if nudged:
                    return "no_tool_call"
                nudged = True
                self.say({"role": "user", "content": NUDGE})
                continue
            nudged = False
            for call_id, name, raw in calls:
                result = self.call_tool(name, raw)
                self.say({"role": "tool", "tool_call_id": call_id, "content": result}, tool_call_id=call_id)
            if any(name == "finish" for _, name, _ in calls):
                return "finish"
        return "max_turns"

    def result(self, reason: Reason) -> ResultEvent:
        return ResultEvent(finished=reason == "finish", reason=reason, turns=self.turns,
                           wall_s=round(time.monotonic() - self.started, 3), **self.total.model_dump(include=WRITTEN))


# ---- command line ------------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got '{text}'")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'")
        return value
    return parse


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got '{text}'")
    return value


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="rooftop's built-in kernel agent over an OpenAI-compatible endpoint.")
    p.add_argument("--version", action="version", version=f"rooftop {rooftop_version()}")
    p.add_argument("--model", required=True, help="model name as the endpoint knows it")
    p.add_argument("--base-url", help="endpoint, e.g. http://localhost:8000/v1 (default: $OPENAI_BASE_URL)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key (default OPENAI_API_KEY; may be unset)")
    p.add_argument("--max-turns", type=_positive(int), default=20, metavar="N", help="model calls at most")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=_positive(int), metavar="N", help="completion tokens per call")
    p.add_argument("--tool-timeout", type=_positive(float), default=900.0, metavar="S",
                   help="seconds ./bench may run per call")
    p.add_argument("--request-timeout", type=_positive(float), default=600.0, metavar="S",
                   help="seconds one model call may take")
    p.add_argument("--retries", type=_non_negative_int, default=5, metavar="N",
                   help="retries of a model call on 429, 5xx or connection errors")
    p.add_argument("--backoff", type=_positive(float), default=2.0, metavar="S",
                   help="first retry delay in seconds, doubled each retry")
    p.add_argument("--workspace", default=".", help="the workspace folder (default: the working directory)")
    return p


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    workspace = Path(options.workspace).resolve()
    prompt_file = workspace / "PROMPT.md"
    if not prompt_file.is_file():
        print(f"{PROG}: error: no PROMPT.md in {workspace}", file=sys.stderr)
        return 2
    prompt = prompt_file.read_text(encoding="utf-8", errors="replace")

    stdout, sys.stdout = sys.stdout, sys.stderr  # stdout carries the transcript alone; stray prints go to stderr
    try:
        return _run(options, workspace, prompt, TranscriptWriter(stdout))
    finally:
        sys.stdout = stdout


def _run(options: argparse.Namespace, workspace: Path, prompt: str, writer: TranscriptWriter) -> int:
    base_url = options.base_url or os.environ.get("OPENAI_BASE_URL") or None
    client = openai.OpenAI(base_url=base_url, api_key=os.environ.get(options.api_key_env) or "unset",
                           timeout=options.request_timeout, max_retries=0)
    writer.emit(StartEvent(version=rooftop_version(), model=options.model, base_url=str(client.base_url),
                           tools=[t["function"]["name"] for t in TOOLS], max_turns=options.max_turns))
    agent = Agent(options, client, writer, workspace)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        reason = agent.run(prompt)
    except FatalError as exc:
        writer.emit(ErrorEvent(message=str(exc), fatal=True, status=exc.status))
        print(f"{PROG}: fatal: {exc}", file=sys.stderr)
        reason = "error"
    except (Terminated, KeyboardInterrupt):
        writer.emit(ErrorEvent(message="terminated by a signal", fatal=True))
        reason = "error"
    except Exception as exc:  # a bug of ours: keep the transcript whole, then show the traceback
        writer.emit(ErrorEvent(message=f"internal error: {_brief(exc)}", fatal=True))
        traceback.print_exc()
        reason = "error"
    finally:
        signal.signal(signal.SIGTERM, previous)
    writer.emit(agent.result(reason))
    return 1 if reason == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
