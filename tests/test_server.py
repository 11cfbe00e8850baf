"""`rooftop serve`: sessions and evaluations over HTTP on a real running service (CPU), tokens,
limits, one-line 4xx errors, restarts, reaping, held-out shapes that never leak, and a fuzz of
the API from its own OpenAPI schema with no 5xx answer."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import schemathesis
import yaml
from conftest import FIXTURES
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from rooftop.server.app import ServerConfig, create_app
from rooftop.server.client import Client, ServerError
from rooftop.server.guard import MAX_REQUEST_BYTES
from rooftop.vocabulary import Settings

pytestmark = pytest.mark.slow

GOOD = (FIXTURES / "solutions/good.py").read_text()
PEEKING = GOOD.replace("        return x * self.alpha",
                       "        if x.shape[1] != 256:\n"
                       "            raise RuntimeError(f'peeked N={x.shape[1]} B={x.shape[0]}')\n"
                       "        return x * self.alpha")
TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SECRETS = ("1001", "withheld_q", "the secret shape")  # the held-out shape of fixtures/hidden: parameters, name, note


@pytest.fixture(scope="module")
def decks(tmp_path_factory) -> Iterator[None]:
    """A user deck `fixtures` with `scale` (smoke shapes: episodes run those on a CPU) and
    `hidden` (no smoke shapes: the visible one runs, and grading adds the held-out one)."""
    root = tmp_path_factory.mktemp("decks")
    shutil.copytree(FIXTURES / "problems/scale", root / "fixtures/scale")
    shutil.copytree(FIXTURES / "problems/scale", root / "fixtures/hidden")
    spec = yaml.safe_load((root / "fixtures/hidden/problem.yaml").read_text())
    spec.pop("smoke")
    spec["name"], spec["shapes"][1]["name"], spec["shapes"][1]["note"] = "hidden", "withheld_q", "the secret shape"
    (root / "fixtures/hidden/problem.yaml").write_text(yaml.safe_dump(spec))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ROOFTOP_DECKS", str(root))
        yield


def _config(db, **changes) -> ServerConfig:
    return ServerConfig(db=db, device="cpu", token=TOKEN, settings=Settings(device="cpu", timeout=60), **changes)


@pytest.fixture(scope="module")
def api(decks, tmp_path_factory) -> Iterator[TestClient]:
    app = create_app(_config(tmp_path_factory.mktemp("server") / "r.db"))
    with TestClient(app, headers=AUTH) as client:
        yield client


def test_a_token_is_required_when_the_server_has_one(api):
    assert api.get("/v1/health", headers={"Authorization": ""}).status_code == 200  # liveness needs none
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        answer = api.get("/v1/splits", headers=headers)
        assert answer.status_code == 401 and answer.json() == {"error": "authorization: expected 'Bearer <token>'"}
    assert api.get("/v1/splits").status_code == 200


def test_a_request_without_the_token_is_refused_before_its_body_is_read(decks, tmp_path):
    """Unauthenticated chunked uploads of 4 MB each used to be read whole (and the memory kept)
    before the token was looked at; a 5 MB chunked body got a connection reset, not its 413."""
    import httpx

    def chunks() -> Iterator[bytes]:  # 5 MB, no Content-Length: chunked
        for _ in range(80):
            yield b"x" * (64 << 10)

    with serving(_config(tmp_path / "r.db")) as url:
        answer = httpx.post(f"{url}/v1/sessions", content=chunks(), timeout=60)
        assert answer.status_code == 401 and answer.json() == {"error": "authorization: expected 'Bearer <token>'"}
        assert answer.headers["www-authenticate"] == "Bearer"  # refused before the body limit read it
        answer = httpx.post(f"{url}/v1/sessions", content=chunks(), headers=AUTH, timeout=60)
        assert answer.status_code == 413 and "request body: larger than" in answer.json()["error"]
        session = httpx.post(f"{url}/v1/sessions", json={"task": "fixtures/scale"}, headers=AUTH).json()["id"]
        answer = httpx.post(f"{url}/v1/sessions/{session}/calls", content=chunks(),
                            headers={**AUTH, "Content-Type": "application/json"}, timeout=60)
        assert answer.status_code == 413
        assert httpx.get(f"{url}/v1/health").status_code == 200  # liveness still needs no token


def test_calls_on_sessions_that_do_not_exist_leave_no_lock_behind(api):
    """6,000 404s used to add 68 MB of per-session locks."""
    for i in range(200):
        answer = api.post(f"/v1/sessions/nope{i}/calls", json={"tool": "finish"})
        assert answer.status_code == 404
    assert api.app.state.session_locks == {}


def test_a_session_closed_during_a_call_stays_closed(decks, tmp_path):
    """A DELETE while a tool call ran was undone when the call returned: the session was open
    again and `finish` then answered 200."""
    import httpx

    with serving(_config(tmp_path / "r.db")) as url:
        session = httpx.post(f"{url}/v1/sessions", json={"task": "fixtures/scale", "max_turns": 3},
                             headers=AUTH).json()["id"]
        calls = f"{url}/v1/sessions/{session}/calls"
        answers: list[httpx.Response] = []
        running = threading.Thread(target=lambda: answers.append(
            httpx.post(calls, json={"tool": "run_kernel", "code": GOOD}, headers=AUTH, timeout=300)))
        running.start()
        time.sleep(1.0)  # the evaluation takes seconds on a CPU
        assert running.is_alive(), "the tool call ended before the session could be closed during it"
        assert httpx.delete(f"{url}/v1/sessions/{session}", headers=AUTH).status_code == 204
        running.join(timeout=300)
        assert answers and answers[0].status_code == 200  # the call that was running still answers
        state = httpx.get(f"{url}/v1/sessions/{session}", headers=AUTH).json()
        assert state["state"] == "closed" and state["turns"] == 1  # its turn is kept, its old state is not
        finish = httpx.post(calls, json={"tool": "finish"}, headers=AUTH)
        assert finish.status_code == 409 and "closed" in finish.json()["error"]


def test_tasks_list_visible_shapes_only(api):
    assert {"name": "fixtures", "tasks": 2} in api.get("/v1/splits").json()
    cards = {c["name"]: c for c in api.get("/v1/tasks", params={"split": "fixtures"}).json()}
    assert set(cards) == {"fixtures/scale", "fixtures/hidden"}
    assert [s["name"] for s in cards["fixtures/hidden"]["shapes"]] == ["small"]
    assert api.get("/v1/tasks/fixtures/hidden").json() == cards["fixtures/hidden"]
    assert api.get("/v1/tasks", params={"split": "nope"}).status_code == 404
    assert api.get("/v1/tasks/fixtures/../../etc").status_code == 404


def test_a_session_runs_kernels_and_finishes(api):
    made = api.post("/v1/sessions", json={"task": "fixtures/scale", "max_turns": 3, "reward": "kevin"})
    assert made.status_code == 201, made.text
    session = made.json()
    assert session["state"] == "open" and "run_kernel" in session["prompt"] and session["max_turns"] == 3
    step = api.post(f"/v1/sessions/{session['id']}/calls", json={"tool": "run_kernel", "code": GOOD}).json()
    assert step["observation"].startswith("status: correct") and step["reward"] >= 0.3 and not step["terminated"]
    step = api.post(f"/v1/sessions/{session['id']}/calls", json={"tool": "finish"}).json()
    assert step["terminated"] and step["info"]["final"]["status"] == "correct"
    state = api.get(f"/v1/sessions/{session['id']}").json()
    assert state["state"] == "done" and state["turns"] == 1 and state["final_reward"] == step["reward"]
    again = api.post(f"/v1/sessions/{session['id']}/calls", json={"tool": "finish"})
    assert again.status_code == 409 and "is done" in again.json()["error"]
    assert api.delete(f"/v1/sessions/{session['id']}").status_code == 204
    assert api.get(f"/v1/sessions/{session['id']}").json()["state"] == "closed"
    assert api.get("/v1/sessions/nosuch").status_code == 404


@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/v1/sessions", {}, 422, "task: Field required"),
    ("/v1/sessions", {"task": "fixtures/scale", "max_turns": 0}, 422, "max_turns: Input should be greater than"),
    ("/v1/sessions", {"task": "fixtures/scale", "reward": "fast"}, 422, "reward: unknown reward function 'fast'"),
    ("/v1/sessions", {"task": "fixtures/nope"}, 404, "task: no task named 'fixtures/nope'"),
    ("/v1/sessions", {"task": "/etc/passwd"}, 404, "task: no task named '/etc/passwd'"),
    ("/v1/sessions", {"task": "fixtures/scale", "sandbox": "none"}, 422, "sandbox: Extra inputs are not permitted"),
    ("/v1/evaluations", {"problem": "fixtures/scale"}, 422, "code: Field required"),
    ("/v1/evaluations", {"problem": "fixtures/scale", "code": GOOD, "shapes": "held_out"}, 422,
     "shapes: Input should be 'visible' or 'all'"),
    ("/v1/evaluations", {"problem": "fixtures/scale", "code": GOOD, "checks": False}, 422,
     "checks: Extra inputs are not permitted"),
    ("/v1/evaluations", {"problem": "fixtures/scale", "code": GOOD, "name": "../x.py"}, 422, "name: String should"),
])
def test_bad_requests_are_4xx_naming_the_field(api, path, body, status, message):
    answer = api.post(path, json=body)
    assert answer.status_code == status and answer.json()["error"].startswith(message), answer.text


def test_bad_tool_calls_and_bodies(api):
    session = api.post("/v1/sessions", json={"task": "fixtures/scale"}).json()["id"]
    calls = f"/v1/sessions/{session}/calls"
    assert api.post(calls, json={"tool": "rm"}).json()["error"].startswith("tool: Input should be 'run_kernel'")
    assert api.post(calls, json={"tool": "run_kernel"}).json() == {
        "error": "code: run_kernel needs the code of a solution file"}
    answer = api.post(calls, content=b"{not json", headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and answer.json()["error"].startswith("")
    huge = b'{"tool": "run_kernel", "code": "' + b"x" * (MAX_REQUEST_BYTES + 10) + b'"}'
    answer = api.post(calls, content=huge, headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and "request body: larger than" in answer.json()["error"]

    def streamed() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield huge

    answer = api.post(calls, content=streamed(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413


def test_plain_evaluations_show_the_agent_view(api):
    made = api.post("/v1/evaluations", json={"problem": "fixtures/hidden", "code": PEEKING})
    assert made.status_code == 202 and made.json()["state"] in ("queued", "building", "built", "running", "done")
    visible = _wait(api, made.json()["id"])
    assert visible["view"]["status"] == "correct" and [s["shape"] for s in visible["view"]["shapes"]] == ["small"]
    graded = _wait(api, api.post("/v1/evaluations", json={"problem": "fixtures/hidden", "code": PEEKING,
                                                            "shapes": "all"}).json()["id"])
    assert graded["view"]["status"] == "runtime_error" and graded["view"]["messages"] == []
    assert graded["view"]["splits"]["held_out"] == {"shapes": 1, "correct": 0, "geomean_speedup": None, "unmeasured": 0}
    assert api.get("/v1/evaluations/" + "0" * 64).status_code == 404


def test_no_endpoint_tells_a_held_out_shape(api):
    """Through every endpoint and error, a session learns nothing of `hidden`'s held-out shape."""
    said = [api.get("/v1/tasks", params={"split": "fixtures"}).text, api.get("/v1/tasks/fixtures/hidden").text,
            api.get("/v1/splits").text]
    made = api.post("/v1/sessions", json={"task": "fixtures/hidden", "max_turns": 4})
    said.append(made.text)
    calls = f"/v1/sessions/{made.json()['id']}/calls"
    for code in (PEEKING, "import torch\nraise SystemExit(str(torch.randn(3)))\n", GOOD.replace("alpha\n", "2\n")):
        said.append(api.post(calls, json={"tool": "run_kernel", "code": code}).text)
    said.append(api.post(calls, json={"tool": "run_kernel"}).text)
    said.append(api.post("/v1/sessions", json={"task": "fixtures/hidden", "reward": "fast"}).text)
    said.append(api.post(calls, json={"tool": "finish"}).text)  # grades PEEKING, which talks on the odd shape
    said.append(api.get(f"/v1/sessions/{made.json()['id']}").text)
    ident = api.post("/v1/evaluations", json={"problem": "fixtures/hidden", "code": PEEKING, "shapes": "all"}).json()
    said.append(str(_wait(api, ident["id"])))
    assert '"status":"runtime_error"' in said[-3]  # the graded run did meet the held-out shape
    for secret in SECRETS:  # a number counts as itself, not as digits of another (a busy machine's 0.1001 s)
        pattern = re.compile(rf"(?<![\d.]){re.escape(secret)}(?![\d.])")
        assert not [text for text in said if pattern.search(text)], secret


def test_sessions_and_evaluations_survive_a_restart_and_idle_ones_are_reaped(decks, tmp_path):
    db = tmp_path / "r.db"
    with TestClient(create_app(_config(db)), headers=AUTH) as first:
        session = first.post("/v1/sessions", json={"task": "fixtures/scale", "max_turns": 3}).json()["id"]
        first.post(f"/v1/sessions/{session}/calls", json={"tool": "run_kernel", "code": GOOD})
        evaluation = first.post("/v1/evaluations", json={"problem": "fixtures/scale", "code": GOOD}).json()["id"]
    with TestClient(create_app(_config(db)), headers=AUTH) as second:
        assert second.get(f"/v1/sessions/{session}").json()["turns"] == 1
        assert _wait(second, evaluation)["view"]["status"] == "correct"
        step = second.post(f"/v1/sessions/{session}/calls", json={"tool": "finish"}).json()
        assert step["terminated"] and step["info"]["final"]["status"] == "correct", step
    with TestClient(create_app(_config(db, idle_seconds=1.0)), headers=AUTH) as third:
        idle = third.post("/v1/sessions", json={"task": "fixtures/scale"}).json()["id"]
        deadline = time.monotonic() + 10
        while third.get(f"/v1/sessions/{idle}").json()["state"] != "expired":
            assert time.monotonic() < deadline, "an idle session was not reaped"
            time.sleep(0.2)
        assert third.post(f"/v1/sessions/{idle}/calls", json={"tool": "finish"}).status_code == 409
        assert third.get(f"/v1/sessions/{session}").json()["state"] == "done"  # a finished one stays as it was


def _wait(api: TestClient, ident: str) -> dict:
    deadline = time.monotonic() + 120
    while (found := api.get(f"/v1/evaluations/{ident}").json())["state"] not in ("done", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return found


@contextlib.contextmanager
def serving(config: ServerConfig) -> Iterator[str]:
    """The app under uvicorn on a free loopback port, in a thread: the real server."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def test_the_client_and_the_remote_env_over_a_real_server(decks, tmp_path):
    with serving(_config(tmp_path / "r.db")) as url:
        assert Client(url).http.get("/health").status_code == 200
        with pytest.raises(ServerError, match="401"):
            Client(url).splits()
        client = Client(url, token=TOKEN)
        assert any(t["name"] == "fixtures/scale" for t in client.tasks("fixtures"))
        env = client.env(reward="kevin", max_turns=2)
        prompt, info = env.reset("fixtures/scale")  # the local env's signature: reset(task)
        assert "ModelNew" in prompt and info["max_turns"] == 2
        assert set(info) == {"episode", "task", "tools", "max_turns", "shapes"} and info["shapes"] == "smoke"
        text, reward, terminated, truncated, info = env.step({"tool": "run_kernel", "code": GOOD})
        assert text.startswith("status: correct") and not terminated
        text, reward, terminated, truncated, info = env.step({"tool": "finish"})
        assert terminated and info["final"]["status"] == "correct"
        done = client.wait(client.evaluate("fixtures/scale", GOOD)["id"], timeout=120)
        assert done["view"]["status"] == "correct"
        with pytest.raises(ServerError, match="404: task: no task named 'nope'"):
            client.evaluate("nope", GOOD)


def test_serve_refuses_a_public_address_without_a_token(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "rooftop", "serve", "--host", "0.0.0.0", "--device", "cpu",
                           "--db", str(tmp_path / "r.db")], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "needs a token" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = subprocess.run([sys.executable, "-m", "rooftop", "serve", "--token-file", str(tmp_path / "missing"),
                           "--device", "cpu"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and "--token-file" in proc.stderr and "Traceback" not in proc.stderr


def test_fuzzing_the_api_from_its_schema_gets_no_5xx(decks, tmp_path):
    """Every operation, with and without the token, on inputs drawn from the OpenAPI schema, valid
    and broken ones: never a server error. The service behind is the real one (a drawn task name
    that happened to exist would start a real evaluation)."""
    failures: list[str] = []
    statuses: dict[int, int] = {}
    with serving(_config(tmp_path / "r.db")) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 10
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @given(case=operation.as_strategy(generation_mode=mode))
                @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
                def fuzz(case: schemathesis.Case) -> None:
                    for headers in (AUTH, {}):
                        response = case.call(headers=headers, timeout=120)
                        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                        if response.status_code >= 500:
                            failures.append(f"{case.method} {case.formatted_path} {response.status_code}: "
                                            f"{response.text[:200]}")

                try:
                    fuzz()
                except Unsatisfiable:
                    assert mode is GenerationMode.NEGATIVE  # nothing to break in an operation without inputs
    assert failures == []
    assert sum(statuses.values()) >= 300 and {401, 404, 422} <= set(statuses), statuses


def test_the_token_is_in_no_environment_of_the_server_or_its_workers(tmp_path):
    """A candidate run without a sandbox read ROOFTOP_TOKEN from /proc/<device worker>/environ."""
    import socket as sockets

    import httpx

    with sockets.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = "tok-" + "7" * 24
    env = {**os.environ, "ROOFTOP_TOKEN": token}
    server = subprocess.Popen([sys.executable, "-m", "rooftop", "serve", "--device", "cpu", "--port", str(port),
                               "--db", str(tmp_path / "r.db"), "--workers", "1", "--builders", "1"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/splits", headers={"Authorization": f"Bearer {token}"},
                             timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
            time.sleep(0.2)
        time.sleep(2.0)  # the service's workers start beside the server
        tree, seen = [server.pid], []
        while tree:
            pid = tree.pop()
            try:
                seen.append((pid, open(f"/proc/{pid}/environ", "rb").read()))
                for task in os.listdir(f"/proc/{pid}/task"):
                    tree += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
            except OSError:
                continue
        assert len(seen) >= 3  # the server, a device worker and a build worker at least
        assert not [pid for pid, environ in seen if token.encode() in environ]
    finally:
        server.terminate()
        server.wait(timeout=60)
