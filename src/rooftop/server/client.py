"""A small client for `rooftop serve`, and the environment over HTTP.

    client = Client("http://127.0.0.1:8000", token=os.environ.get("ROOFTOP_TOKEN"))
    env = client.env("examples/softmax", reward="kevin")
    prompt, info = env.reset()
    text, reward, terminated, truncated, info = env.step({"tool": "run_kernel", "code": source})
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from rooftop.errors import UserError


class ServerError(Exception):
    """The server said no: its status code and its one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message


class Client:
    def __init__(self, base_url: str, token: str | None = None, timeout: float = 3600.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url.rstrip("/") + "/v1", headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                message = response.json().get("error", response.text)
            except ValueError:
                message = response.text
            raise ServerError(response.status_code, message)
        return response.json() if response.content else None

    def splits(self) -> list[dict[str, Any]]:
        return self._call("GET", "/splits")

    def tasks(self, split: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "/tasks", params={"split": split} if split else None)

    def task(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"/tasks/{name}")

    def new_session(self, task: str, reward: str = "default", max_turns: int | None = None) -> dict[str, Any]:
        return self._call("POST", "/sessions", json={"task": task, "reward": reward, "max_turns": max_turns})

    def session(self, ident: str) -> dict[str, Any]:
        return self._call("GET", f"/sessions/{ident}")

    def call(self, ident: str, tool: str, code: str | None = None) -> dict[str, Any]:
        return self._call("POST", f"/sessions/{ident}/calls", json={"tool": tool, "code": code})

    def delete_session(self, ident: str) -> None:
        self._call("DELETE", f"/sessions/{ident}")

    def evaluate(self, problem: str, code: str, shapes: str = "visible", name: str = "solution.py") -> dict[str, Any]:
        return self._call("POST", "/evaluations", json={"problem": problem, "code": code, "shapes": shapes,
                                                         "name": name})

    def evaluation(self, ident: str) -> dict[str, Any]:
        return self._call("GET", f"/evaluations/{ident}")

    def wait(self, ident: str, timeout: float | None = None, every: float = 0.2) -> dict[str, Any]:
        """An evaluation once it is done or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (found := self.evaluation(ident))["state"] not in ("done", "failed"):
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"evaluation {ident} not finished after {timeout} s")
            time.sleep(every)
        return found

    def env(self, task: str | None = None, reward: str = "default", max_turns: int | None = None) -> RemoteEnv:
        return RemoteEnv(self, task, reward, max_turns)


class RemoteEnv:
    """`KernelEnv`'s reset and step, with the episode kept by the server: `reset(task)` as the
    local env's (the task given here is the default), the same observation and info."""

    def __init__(self, client: Client, task: str | None = None, reward: str = "default",
                 max_turns: int | None = None) -> None:
        self.client, self.task, self.reward, self.max_turns = client, task, reward, max_turns
        self.session: str | None = None

    def reset(self, task: str | None = None, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        task = task or self.task
        if not task:
            raise UserError("reset: name a task (reset(task), or Client.env(task))")
        made = self.client.new_session(task, self.reward, self.max_turns)
        self.session, self.task = made["id"], task
        return made["prompt"], {"episode": made["id"], "task": made["task"], "tools": ["run_kernel", "finish"],
                                "max_turns": made["max_turns"], "shapes": made["shapes"]}

    def step(self, action: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.session is None:
            raise RuntimeError("step before reset")
        got = self.client.call(self.session, action["tool"], action.get("code"))
        return got["observation"], got["reward"], got["terminated"], got["truncated"], got["info"]
