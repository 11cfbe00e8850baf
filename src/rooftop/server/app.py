"""`rooftop serve`: the environment and plain evaluations over HTTP (FastAPI).

    GET    /v1/splits                      the decks, with their task counts
    GET    /v1/tasks?split=DECK            the tasks of a deck (visible shapes only)
    GET    /v1/tasks/{task}                one task
    POST   /v1/sessions                    start an episode: {task, reward?, max_turns?} -> its prompt
    GET    /v1/sessions/{id}               an episode's state
    POST   /v1/sessions/{id}/calls         a tool call: {tool: run_kernel, code} or {tool: finish}
    DELETE /v1/sessions/{id}               end an episode
    POST   /v1/evaluations                 queue a plain evaluation: {problem, code, shapes: visible|all}
    GET    /v1/evaluations/{id}            its state, and its agent-facing view once done

Everything a caller sees of a verdict is the agent-facing view (env/view.py): no held-out
shape's name, parameters, figures or messages, ever. How a candidate is checked is the server's
business (its settings: sandbox, checks, timeouts); a request cannot weaken it. Sessions and
evaluations live in the results store, so they survive a restart of the server; a session
untouched for `idle_seconds` is reaped (expired); a session closed or expired stays so, even when a
tool call that was running then returns. Requests carry a bearer token when the server has one,
checked before any body is read (a refused body is drained unread, never kept); it must have one
to listen beyond the loopback interface (cli/serve.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from rooftop.env.core import DEFAULT_TURNS, AsyncKernelEnv, Episode, EpisodeOver, StepResult, ToolCall, shape_groups
from rooftop.env.prompt import TaskCard, task_card, task_prompt
from rooftop.env.view import AgentView, agent_view
from rooftop.errors import UserError
from rooftop.problem.registry import bundled_names, deck_names, resolve
from rooftop.problem.spec import Problem
from rooftop.score.reward import REWARDS
from rooftop.server.guard import API, MAX_REQUEST_BYTES, UNAUTHORIZED, Authorized, BodyLimit, token_ok
from rooftop.service.evaluator import Evaluator
from rooftop.service.jobs import MAX_SOURCE_BYTES, JobState, SourceSnapshot
from rooftop.vocabulary import DeviceChoice, DeviceType, Settings


class ServerConfig(BaseModel):
    db: Path
    device: DeviceType
    token: str | None = None
    settings: Settings = Settings()  # how every candidate is checked; requests cannot change it
    idle_seconds: float = 1800.0
    max_turns: int = DEFAULT_TURNS
    workers: int | None = None
    builders: int | None = None  # None: one per core beside the device workers'


# -- documents ------------------------------------------------------------------------------------
class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitOut(BaseModel):
    name: str
    tasks: int


class NewSession(_Request):
    task: str = Field(min_length=1, max_length=500, description="a problem name, as GET /v1/tasks lists them")
    reward: str = Field(default="default", max_length=100, description="a named reward function")
    max_turns: int | None = Field(default=None, ge=1, le=100)


class SessionOut(BaseModel):
    id: str
    task: str
    state: str  # open, done, closed, expired
    prompt: str
    max_turns: int
    shapes: str  # the shapes run_kernel runs (a group or names)
    turns: int
    best_reward: float | None
    final_reward: float | None


class Call(_Request):
    tool: Literal["run_kernel", "finish"]
    code: str | None = Field(default=None, max_length=MAX_SOURCE_BYTES)


class NewEvaluation(_Request):
    problem: str = Field(min_length=1, max_length=500)
    code: str = Field(min_length=1, max_length=MAX_SOURCE_BYTES, description="a Python file defining ModelNew")
    name: str = Field(default="solution.py", max_length=200, pattern=r"^[A-Za-z0-9_.\-]+\.py$")
    shapes: Literal["visible", "all"] = "visible"


class EvaluationOut(BaseModel):
    id: str
    problem: str
    state: JobState
    view: AgentView | None = None
    error: str | None = None


class Problem4xx(BaseModel):
    error: str


def create_app(config: ServerConfig, evaluator: Evaluator | None = None) -> FastAPI:
    """The app; it starts (and on shutdown stops) its own evaluator unless given one."""
    owned = evaluator is None
    service = evaluator or Evaluator(config.db, config.device, workers=config.workers, builders=config.builders)
    locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.start()
        reaper = asyncio.create_task(_reap(service, config.idle_seconds))
        try:
            yield
        finally:
            reaper.cancel()
            if owned:
                await asyncio.to_thread(service.close)

    app = FastAPI(title="rooftop", version="1", lifespan=lifespan,
                  description="Kernel-writing episodes and evaluations; see GET /docs.",
                  responses={401: {"model": Problem4xx}, 404: {"model": Problem4xx}, 413: {"model": Problem4xx},
                             422: {"model": Problem4xx}})
    app.add_middleware(BodyLimit, limit=MAX_REQUEST_BYTES)
    app.add_middleware(Authorized, token=config.token)  # added last: it runs first, before any body is read
    app.state.session_locks = locks

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return JSONResponse({"error": f"{where}: {first.get('msg', 'invalid')}"}, status_code=422)

    @app.exception_handler(HTTPException)
    async def refused(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.get(f"{API}/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "device": config.device}

    auth = [Depends(_authorized(config.token))]
    app.include_router(_task_routes(config), dependencies=auth)
    app.include_router(_session_routes(config, service, locks), dependencies=auth)
    app.include_router(_evaluation_routes(config, service), dependencies=auth)
    return app


def _authorized(token: str | None) -> Callable[..., None]:
    """The dependency every route but /health has: the bearer token, when the server has one
    (the middleware has checked it already, before any body; this keeps it in the API's schema)."""

    def authorized(authorization: Annotated[str | None, Header()] = None) -> None:
        if not token_ok(token, authorization):
            raise HTTPException(401, UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})

    return authorized


def _task_routes(config: ServerConfig) -> APIRouter:
    router = APIRouter()

    @router.get(f"{API}/splits")
    async def splits() -> list[SplitOut]:
        names = bundled_names()
        return [SplitOut(name=d, tasks=sum(n.rsplit("/", 1)[0] == d for n in names)) for d in deck_names()]

    @router.get(f"{API}/tasks")
    async def tasks(split: Annotated[str | None, Query(max_length=200)] = None) -> list[TaskCard]:
        names = _fresh(f"names:{split}", lambda: bundled_names(split))
        if split is not None and not names:
            raise HTTPException(404, f"split: no deck named '{split}' (GET {API}/splits lists them)")
        return [_card(_problem(n), config.device) for n in names]

    @router.get(API + "/tasks/{task:path}")
    async def task(task: str) -> TaskCard:
        return _card(_problem(task), config.device)

    return router


def _session_routes(config: ServerConfig, service: Evaluator, locks: dict[str, asyncio.Lock]) -> APIRouter:
    """Episodes: one tool call at a time per session (its lock), a closed session stays closed."""
    router = APIRouter()

    @router.post(f"{API}/sessions", status_code=201)
    async def new_session(body: NewSession) -> SessionOut:
        if body.reward not in REWARDS:
            raise HTTPException(422, f"reward: unknown reward function '{body.reward}' "
                                     f"(known: {', '.join(REWARDS.names())})")
        env = AsyncKernelEnv(service, reward=body.reward, max_turns=body.max_turns or config.max_turns,
                             settings=config.settings)
        env.reset(_problem(body.task))
        assert env.episode is not None
        _save(service, env.episode)
        return _session_out(env.episode, "open")

    @router.get(API + "/sessions/{ident}")
    async def get_session(ident: str) -> SessionOut:
        episode, state = _load(service, ident)
        return _session_out(episode, state)

    @router.post(API + "/sessions/{ident}/calls")
    async def call(ident: str, body: Call) -> StepResult:
        if body.tool == "run_kernel" and not body.code:
            raise HTTPException(422, "code: run_kernel needs the code of a solution file")
        _load(service, ident)  # a 404 before any lock: the table holds only sessions that exist
        async with locks.setdefault(ident, asyncio.Lock()):  # one call at a time per episode
            episode, state = _load(service, ident)
            if state != "open":
                locks.pop(ident, None)
                raise HTTPException(409, f"session {ident} is {state}: start a new one")
            env = AsyncKernelEnv.resume(episode, service, config.settings, _problem(episode.task))
            try:
                step = await env.step_result(ToolCall(tool=body.tool, code=body.code))
            except EpisodeOver as exc:
                raise HTTPException(409, str(exc)) from None
            _save(service, episode)  # a session closed meanwhile stays closed (Store.save_session)
            if episode.done:
                locks.pop(ident, None)
            return step

    @router.delete(API + "/sessions/{ident}", status_code=204)
    async def delete_session(ident: str) -> Response:
        episode, _ = _load(service, ident)
        _save(service, episode, "closed")
        locks.pop(ident, None)
        return Response(status_code=204)

    return router


def _evaluation_routes(config: ServerConfig, service: Evaluator) -> APIRouter:
    router = APIRouter()

    @router.post(f"{API}/evaluations", status_code=202)
    async def new_evaluation(body: NewEvaluation) -> EvaluationOut:
        problem = _problem(body.problem)
        run, graded = shape_groups(problem, config.device)
        settings = config.settings.model_copy(update={"device": DeviceChoice(config.device),
                                                      "shapes": run if body.shapes == "visible" else graded})
        ident = service.submit(problem, SourceSnapshot.from_code(body.code, body.name), settings, label=body.name)
        return _evaluation_out(service, ident)

    @router.get(API + "/evaluations/{ident}")
    async def get_evaluation(ident: str) -> EvaluationOut:
        if service.queue.get(ident) is None:
            raise HTTPException(404, f"evaluation {ident}: no such evaluation")
        return _evaluation_out(service, ident)

    return router


# -- helpers ----------------------------------------------------------------------------------------
FRESH_SECONDS = 5.0  # how long a loaded problem (and the list of names) is reused before it is read again
_loaded: dict[str, tuple[float, Any]] = {}


def _fresh(key: str, load: Callable[[], Any]) -> Any:
    """`load()`, reused for FRESH_SECONDS: a spec's parse and validation cost milliseconds, which
    every request would pay otherwise, while an edited problem shows within seconds."""
    now = time.monotonic()
    found = _loaded.get(key)
    if found is None or now - found[0] > FRESH_SECONDS:
        found = _loaded[key] = (now, load())
    return found[1]


def _problem(name: str) -> Problem:
    """A bundled or imported problem by name; never a path on the server's disk."""
    if name not in _fresh("names", bundled_names):
        raise HTTPException(404, f"task: no task named '{name[:200]}' (GET {API}/tasks lists them)")
    try:
        return _fresh(f"problem:{name}", lambda: resolve(name))
    except UserError as exc:
        raise HTTPException(404, f"task: {exc}") from None


def _card(problem: Problem, device: DeviceType) -> TaskCard:
    return task_card(problem, shape_groups(problem, device)[0])


def _save(service: Evaluator, episode: Episode, state: str | None = None) -> None:
    service.queue.store.sessions.save(episode.id, episode.task, state or ("done" if episode.done else "open"),
                                     episode.model_dump_json())


def _load(service: Evaluator, ident: str) -> tuple[Episode, str]:
    found = service.queue.store.sessions.get(ident) if len(ident) <= 64 else None
    if found is None:
        raise HTTPException(404, f"session {ident[:64]}: no such session")
    return Episode.model_validate_json(found.episode_json), found.state


def _session_out(episode: Episode, state: str) -> SessionOut:
    problem = _problem(episode.task)
    return SessionOut(id=episode.id, task=episode.task, state=state, max_turns=episode.max_turns,
                      shapes=episode.run_shapes,
                      prompt=task_prompt(problem, episode.run_shapes, episode.max_turns), turns=episode.runs,
                      best_reward=episode.best_reward, final_reward=episode.final_reward)


def _evaluation_out(service: Evaluator, ident: str) -> EvaluationOut:
    job = service.queue.get(ident)
    assert job is not None
    out = EvaluationOut(id=ident, problem=job.problem, state=job.state)
    if job.state is JobState.failed:
        out.error = "no verdict could be made for this candidate"  # the reason may name held-out shapes
    elif job.state is JobState.done and job.evaluation_id is not None:
        verdict = service.queue.store.evaluations.verdict(job.evaluation_id)
        if verdict is not None:
            out.view = agent_view(verdict, verdict.reward or 0.0, graded=job.settings.shapes != "visible")
    return out


async def _reap(service: Evaluator, idle_seconds: float) -> None:
    """Expire sessions nobody touched for `idle_seconds`, now and then."""
    while True:
        await asyncio.to_thread(lambda: service.queue.store.sessions.expire(time.time() - idle_seconds))
        await asyncio.sleep(min(60.0, max(idle_seconds / 4, 0.5)))
