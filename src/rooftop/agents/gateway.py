"""The trusted end of `./check` and `./bench`: one per run, on a Unix socket the agent's
sandbox can reach and nothing else.

A request names a tool and nothing else; the gateway alone decides what is evaluated: the
solution as it stands in the workspace, read from outside the sandbox by the function the final
grade reads it with (`solution_files`: regular files, no links), that problem, on the run's shapes
(visible ones; smoke on a CPU), with correctness only for `check` and with timing for `bench`,
through the evaluation service (its queue keeps two timings off one GPU at once). So a check
and the grade never see two different solutions. The answer is the agent-facing view of the
verdict. Every call is logged in the run folder (`calls.jsonl`).
"""

from __future__ import annotations

import json
import socketserver
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rooftop.agents.workspace import NO_SOLUTION, snapshot, solution_files
from rooftop.env.view import agent_view, render
from rooftop.errors import UserError
from rooftop.problem.spec import Problem
from rooftop.score.reward import compute_reward
from rooftop.service.evaluator import Evaluator, Result
from rooftop.verdict import Status
from rooftop.vocabulary import Settings

MAX_REQUEST = 1024  # {"tool": "check"}, with room to spare


class Call(BaseModel):
    """One ./check or ./bench, as the run folder's calls.jsonl keeps it."""

    tool: str
    at: float
    wall_s: float
    job: str | None = None
    status: str | None = None
    speedup: float | None = None
    error: str | None = None


class Gateway:
    def __init__(self, evaluator: Evaluator, problem: Problem, settings: Settings, *, run_shapes: str,
                 label: str, log: Path, workspace: Path) -> None:
        self.evaluator, self.problem, self.label, self.log = evaluator, problem, label, log
        self.workspace = workspace
        self.settings = settings.model_copy(update={"shapes": run_shapes})
        self.folder = self.socket = Path()  # made on entering: a short path, as socket paths are limited
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()

    def __enter__(self) -> Gateway:
        gateway = self
        self.folder = Path(tempfile.mkdtemp(prefix="rooftop-gw-"))
        self.socket = self.folder / "gateway.sock"

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                raw = self.rfile.readline(MAX_REQUEST + 1)
                answer = gateway.answer(raw)
                try:
                    self.wfile.write(json.dumps(answer).encode())
                except OSError:
                    pass  # the agent gave up waiting

        self._server = socketserver.ThreadingUnixStreamServer(str(self.socket), Handler)
        self._server.daemon_threads = True
        self.socket.chmod(0o777)  # the sandbox's user is this one; the folder is ours alone
        self._thread = threading.Thread(target=self._server.serve_forever, name="rooftop-gateway", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.socket.unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:
            pass

    def answer(self, raw: bytes) -> dict[str, Any]:
        started = time.time()
        try:
            tool = self._request(raw)
            files = solution_files(self.workspace)
            if not files:
                raise UserError(NO_SOLUTION)
        except UserError as exc:
            self._record(Call(tool="?", at=started, wall_s=0.0, error=str(exc)))
            return {"exit": 2, "text": f"refused: {exc}\n"}
        settings = self.settings.model_copy(update={"timing": tool == "bench"})
        job = self.evaluator.submit(self.problem, snapshot(files), settings, label=f"{self.label}:{tool}")
        result = self._wait(job)
        call = Call(tool=tool, at=started, wall_s=round(time.time() - started, 3), job=job)
        if result is None or result.verdict is None:
            call.error = (result.error if result else None) or "the run ended before the verdict"
            self._record(call)
            return {"exit": 1, "text": f"status: internal_error\nmessage: {call.error}\n"}
        verdict = result.verdict
        reward = compute_reward(verdict, "default")
        view = agent_view(verdict, 0.0 if reward is None else reward)
        call.status, call.speedup = verdict.status.value, view.geomean_speedup
        self._record(call)
        return {"exit": 0 if verdict.status is Status.correct else 1, "text": render(view).rstrip("\n") + "\n"}

    def _wait(self, job: str) -> Result | None:
        """The job's result, or None when the run ends first (the service's gate timeouts bound the rest)."""
        while not self._closed.is_set():
            try:
                return self.evaluator.wait(job, timeout=1.0)
            except TimeoutError:
                continue
        return None

    def _request(self, raw: bytes) -> str:
        if len(raw) > MAX_REQUEST:
            raise UserError(f"request: more than {MAX_REQUEST} bytes")
        try:
            body = json.loads(raw)
        except ValueError:
            raise UserError("request: not a JSON object") from None
        if not isinstance(body, dict) or set(body) != {"tool"}:
            raise UserError("request: expected exactly the field 'tool' (the solution is read from the workspace)")
        tool = body["tool"]
        if tool not in ("check", "bench"):
            raise UserError(f"tool: expected 'check' or 'bench', got {str(tool)[:40]!r}")
        return str(tool)

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)
            with self.log.open("a") as f:
                f.write(call.model_dump_json() + "\n")
