"""Tree search over kernel candidates, asynchronous per branch, through the evaluation service.

    config = SearchConfig(model="gpt-x", budget=30, branches=4)
    summary = await search(problems, evaluator, openai.AsyncOpenAI(...), config, Path("search/run"))

Each problem gets `budget` model queries, fixes included, worked by `branches` lines that never
wait for one another: a line picks a parent from the problem's whole archive of correct kernels
(elite or least-explored; the reference when the archive is empty), asks for a faster kernel,
evaluates it on the shapes an agent may see, feeds failures back up to `max_fix_attempts` times,
and starts over until the budget is spent. Problems run side by side, so a slow one holds no
other back. Kernels that differ only in whitespace or comments are evaluated once. Every node is
appended to `<out>/<problem>/nodes.jsonl` as it is made; at the end each problem's best kernel is
graded on every shape, held-out ones included, and `<out>/summary.json` says what was found.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from rooftop.agents.reply import extract_code, reply_task
from rooftop.agents.search_records import (
    Graded,
    Node,
    ProblemSummary,
    Queries,
    SearchConfig,
    SearchSummary,
    code_hash,
    problem_folders,
    select_parent,
)
from rooftop.env.core import shape_groups
from rooftop.env.view import agent_view, render
from rooftop.errors import UserError
from rooftop.score.reward import REWARDS, compute_reward
from rooftop.service.jobs import MAX_SOURCE_BYTES, SourceSnapshot
from rooftop.transcripts.usage import Usage
from rooftop.verdict import Status
from rooftop.vocabulary import DeviceChoice

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from rooftop.problem.spec import Problem
    from rooftop.service.evaluator import Evaluator, Result
    from rooftop.verdict import Verdict

T = TypeVar("T")
NO_CODE, LLM_ERROR = "no_code", "llm_error"  # node statuses beside a verdict's
MAX_BACKOFF = 30.0  # seconds between two tries of one query, at most
ERROR_CHARS = 500  # of a failure's first message kept in the node

SYSTEM = ("You write fast, correct GPU kernels for PyTorch models. Answer with the complete Python file that "
          "defines `ModelNew`, in one ```python block; the last such block of your reply is the one evaluated.")


# -- one problem --------------------------------------------------------------------------------
@dataclass
class _Outcome:
    status: str
    job: str | None = None
    reward: float | None = None
    speedup: float | None = None
    error: str | None = None
    feedback: str = ""  # what a fix query is shown
    eval_s: float = 0.0

    @property
    def correct(self) -> bool:
        return self.status == Status.correct.value


@dataclass
class _Reply:
    text: str | None
    usage: Queries
    seconds: float
    error: str | None = None


@dataclass
class _Problem:
    problem: Problem
    folder: Path
    run_shapes: str
    graded_shapes: str
    rng: random.Random
    used: int = 0
    nodes: list[Node] = field(default_factory=list)
    archive: list[Node] = field(default_factory=list)
    code: dict[int, str] = field(default_factory=dict)  # node id -> code, for correct nodes
    feedback: dict[int, str] = field(default_factory=dict)  # node id -> rendered view of its evaluation
    children: dict[int, int] = field(default_factory=dict)
    seen: dict[str, tuple[int, asyncio.Future[_Outcome]]] = field(default_factory=dict)
    usage: Queries = field(default_factory=Queries)
    finished_s: float = 0.0

    def reserve(self, budget: int) -> int | None:
        """The next query's index, or None when the budget is spent (one event loop: no lock)."""
        if self.used >= budget:
            return None
        self.used += 1
        return self.used


class _Search:
    def __init__(self, evaluator: Evaluator, client: AsyncOpenAI, config: SearchConfig, out: Path,
                 on_node: Callable[[str, Node], None] | None,
                 on_problem: Callable[[ProblemSummary], None] | None) -> None:
        self.evaluator, self.client, self.config, self.out = evaluator, client, config, out
        self.on_node, self.on_problem = on_node, on_problem
        self.limit = asyncio.Semaphore(config.concurrency)
        self.settings = config.settings.model_copy(update={"device": DeviceChoice(evaluator.device)})
        self.start = time.monotonic()

    def now(self) -> float:
        return round(time.monotonic() - self.start, 3)

    # -- a problem from start to grading --------------------------------------------------------
    async def run(self, problem: Problem, folder: str) -> ProblemSummary:
        run_shapes, graded_shapes = shape_groups(problem, self.evaluator.device)
        seed = int.from_bytes(hashlib.sha256(f"{self.config.seed}:{problem.name}".encode()).digest()[:8], "big")
        state = _Problem(problem, self.out / folder, run_shapes, graded_shapes, random.Random(seed))
        (state.folder / "code").mkdir(parents=True, exist_ok=True)
        (state.folder / "nodes.jsonl").touch()
        await _all(self.branch(state, b) for b in range(self.config.branches))
        best = max(state.archive, key=lambda n: (n.reward or 0.0, -n.id), default=None)
        graded = None
        if best is not None:
            (state.folder / "best.py").write_text(state.code[best.id])
            graded = await self.grade(state, state.code[best.id])
        summary = ProblemSummary(
            problem=problem.name, folder=folder, budget=self.config.budget, queries=state.used,
            nodes=len(state.nodes), correct=len(state.archive),
            duplicates=sum(n.duplicate_of is not None for n in state.nodes), best=best.id if best else None,
            best_code_hash=best.code_hash if best else None, best_reward=best.reward if best else None,
            best_speedup=best.speedup if best else None, run_shapes=run_shapes, graded=graded, usage=state.usage,
            finished_s=state.finished_s)
        if self.on_problem is not None:
            self.on_problem(summary)
        return summary

    async def branch(self, state: _Problem, branch: int) -> None:
        """One line of work: select, improve, fix, archive; again until the budget is spent."""
        while (query := state.reserve(self.config.budget)) is not None:
            parent = select_parent(state.archive, state.children, state.rng, self.config.elite, self.config.top_k)
            if parent is not None:
                state.children[parent.id] = state.children.get(parent.id, 0) + 1
            messages = [{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": self.first_prompt(state, parent)}]
            node = await self.attempt(state, branch, query, "improve" if parent else "draft", parent, None, messages)
            fixes = 0
            while node.status not in (Status.correct.value, LLM_ERROR) and fixes < self.config.max_fix_attempts:
                query = state.reserve(self.config.budget)
                if query is None:
                    return
                fixes += 1
                messages.append({"role": "user", "content": self.fix_prompt(state, node)})
                node = await self.attempt(state, branch, query, "fix", parent, node.id, messages)

    def first_prompt(self, state: _Problem, parent: Node | None) -> str:
        task = reply_task(state.problem, state.run_shapes)
        if parent is None:
            return f"{task}\nWrite a `ModelNew` that is correct on every shape and faster than the reference."
        best = max(n.reward or 0.0 for n in state.archive)
        return (f"{task}\n## A correct kernel to improve\n\n```python\n{state.code[parent.id]}```\n\n"
                f"Its evaluation:\n{state.feedback[parent.id]}\n\n"
                f"(The best reward found so far is {best:.4g}; this one's is {parent.reward or 0.0:.4g}.)\n\n"
                "Make it faster while keeping it correct on every shape: a different algorithm, fusion, tiling or "
                "memory layout. Reply with the whole file.")

    def fix_prompt(self, state: _Problem, node: Node) -> str:
        if node.status == NO_CODE:
            return "Your reply had no ```python block. Reply with the complete file defining `ModelNew` in one."
        again = "This is the same code as an earlier attempt, which failed.\n" if node.duplicate_of is not None else ""
        return (f"{again}That kernel failed:\n{state.feedback.get(node.id) or node.error or node.status}\n\n"
                "Fix it and reply with the whole corrected file.")

    # -- one query and its evaluation -----------------------------------------------------------
    async def attempt(self, state: _Problem, branch: int, query: int, kind: Literal["draft", "improve", "fix"],
                      parent: Node | None, fixes: int | None, messages: list[dict[str, str]]) -> Node:
        started = self.now()
        reply = await self.ask(messages)
        state.usage.add(reply.usage)
        base: dict[str, Any] = {"id": len(state.nodes) + 1, "problem": state.problem.name,
                                "parent": parent.id if parent else None, "fixes": fixes, "branch": branch,
                                "kind": kind, "query": query, "started_s": started, "llm_s": round(reply.seconds, 3),
                                "prompt_tokens": reply.usage.prompt_tokens,
                                "completion_tokens": reply.usage.completion_tokens}
        state.nodes.append(Node(status="pending", finished_s=started, **base))  # claims the id
        if reply.text is None:
            return self.record(state, Node(status=LLM_ERROR, error=reply.error, finished_s=self.now(), **base))
        messages.append({"role": "assistant", "content": reply.text})
        code = extract_code(reply.text)
        if code is None:
            return self.record(state, Node(status=NO_CODE, error="no ```python block in the reply",
                                           finished_s=self.now(), **base))
        digest = code_hash(code)
        first = state.seen.get(digest)
        if first is None:
            future: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
            state.seen[digest] = (base["id"], future)
            (state.folder / "code" / f"{digest}.py").write_text(code)
            outcome = await self.evaluate(state, code, base["id"])
            future.set_result(outcome)
        else:
            outcome = await asyncio.shield(first[1])
        node = Node(code_hash=digest, job=outcome.job, status=outcome.status, reward=outcome.reward,
                    speedup=outcome.speedup, error=outcome.error, duplicate_of=first[0] if first else None,
                    eval_s=0.0 if first else round(outcome.eval_s, 3), finished_s=self.now(), **base)
        state.feedback[node.id] = outcome.feedback
        if outcome.correct and first is None:
            state.code[node.id] = code
            state.archive.append(node)
        return self.record(state, node)

    def record(self, state: _Problem, node: Node) -> Node:
        """Appended at once: a search cut short keeps every node it made."""
        state.nodes[node.id - 1] = node
        with (state.folder / "nodes.jsonl").open("a") as f:
            f.write(node.model_dump_json() + "\n")
        state.finished_s = node.finished_s
        if self.on_node is not None:
            self.on_node(state.problem.name, node)
        return node

    async def ask(self, messages: list[dict[str, str]]) -> _Reply:
        """One query: transient failures are retried with backoff; a refused key or model stops the search."""
        import openai

        usage, started, error = Queries(), time.monotonic(), ""
        # sent only when set (some servers refuse a null); the body's extra keys take it on any SDK version
        cap = None if self.config.max_tokens is None else {"max_tokens": self.config.max_tokens}
        for attempt in range(self.config.retries + 1):
            if attempt:
                usage.retries += 1
                await asyncio.sleep(min(MAX_BACKOFF, self.config.backoff * 2 ** (attempt - 1)))
            usage.requests += 1
            try:
                async with self.limit:
                    response = await self.client.chat.completions.create(
                        model=self.config.model, messages=messages,  # type: ignore[arg-type]
                        temperature=self.config.temperature, extra_body=cap)
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise UserError(f"the endpoint {self.client.base_url} refused the API key: {_reason(exc)}")
            except openai.NotFoundError as exc:
                raise UserError(f"--model {self.config.model}: the endpoint {self.client.base_url} does not serve "
                                f"it: {_reason(exc)}")
            except openai.APIStatusError as exc:
                error = f"HTTP {exc.status_code}: {_reason(exc)}"
                if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                    continue
                break
            except openai.APIConnectionError as exc:  # timeouts included
                error = f"{type(exc).__name__}: {exc}"
                continue
            if response.usage is not None:
                usage.tokens = usage.tokens + Usage(input_tokens=response.usage.prompt_tokens,
                                                    output_tokens=response.usage.completion_tokens)
            text = response.choices[0].message.content if response.choices else None
            return _Reply(text or "", usage, time.monotonic() - started)
        usage.failed_queries += 1
        return _Reply(None, usage, time.monotonic() - started, error=error[:ERROR_CHARS])

    async def evaluate(self, state: _Problem, code: str, node_id: int) -> _Outcome:
        started = time.monotonic()
        if len(code.encode()) > MAX_SOURCE_BYTES:
            why = f"the code is {len(code.encode())} bytes; at most {MAX_SOURCE_BYTES} are accepted"
            return _Outcome(Status.rejected.value, error=why, feedback=f"status: rejected\nmessage: {why}")
        settings = self.settings.model_copy(update={"shapes": state.run_shapes})
        try:
            job = self.evaluator.submit(state.problem, SourceSnapshot.from_code(code), settings,
                                        label=f"search:{state.folder.name}:{node_id}")
            result = await self.evaluator.wait_async(job)
        except (RuntimeError, OSError) as exc:  # the service stopped under us: this node has no verdict
            return _Outcome(Status.internal_error.value, error=str(exc)[:ERROR_CHARS], feedback="",
                            eval_s=time.monotonic() - started)
        return self.outcome(result, time.monotonic() - started)

    def outcome(self, result: Result, seconds: float, graded: bool = False) -> _Outcome:
        verdict = result.verdict
        if verdict is None:
            why = result.error or "no verdict"
            return _Outcome(Status.internal_error.value, job=result.job.id, error=why[:ERROR_CHARS],
                            feedback=f"status: internal_error\nmessage: {why[:ERROR_CHARS]}", eval_s=seconds)
        reward = self.reward(verdict)
        first = next(iter(verdict.messages), None)
        return _Outcome(verdict.status.value, job=result.job.id, reward=reward,
                        speedup=verdict.summary.geomean_speedup, eval_s=seconds,
                        error=None if verdict.status is Status.correct or first is None else first[:ERROR_CHARS],
                        feedback=render(agent_view(verdict, reward if reward is not None else 0.0, graded=graded)))

    def reward(self, verdict: Verdict) -> float | None:
        return compute_reward(verdict, self.config.reward)

    async def grade(self, state: _Problem, code: str) -> Graded:
        settings = self.settings.model_copy(update={"shapes": state.graded_shapes})
        try:
            job = self.evaluator.submit(state.problem, SourceSnapshot.from_code(code), settings,
                                        label=f"search:{state.folder.name}:graded")
            outcome = self.outcome(await self.evaluator.wait_async(job), 0.0, graded=True)
        except (RuntimeError, OSError) as exc:
            return Graded(shapes=state.graded_shapes, job=None, status=Status.internal_error.value,
                          error=str(exc)[:ERROR_CHARS])
        return Graded(shapes=state.graded_shapes, job=outcome.job, status=outcome.status, reward=outcome.reward,
                      speedup=outcome.speedup, error=outcome.error)


def _reason(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    return " ".join(str(message or exc).split())[:ERROR_CHARS]


async def _all(coros: Iterable[Awaitable[T]]) -> list[T]:
    """Run side by side; the first failure cancels the rest and is raised as itself."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# -- entry points -------------------------------------------------------------------------------
async def search(problems: list[Problem], evaluator: Evaluator, client: AsyncOpenAI, config: SearchConfig,
                 out: Path, *, on_node: Callable[[str, Node], None] | None = None,
                 on_problem: Callable[[ProblemSummary], None] | None = None) -> SearchSummary:
    """Search every problem at once; the evaluator must be started. `out` must be new or empty."""
    if not problems:
        raise UserError("problems: nothing to search")
    if config.reward not in REWARDS:
        raise UserError(f"reward: unknown reward function '{config.reward}' (known: {', '.join(REWARDS.names())})")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"--out {out}: already exists and is not an empty folder")
    unique = list({p.name: p for p in problems}.values())
    folders = problem_folders(unique)
    out.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    run = _Search(evaluator, client, config, out, on_node, on_problem)
    summaries = await _all(run.run(p, folders[p.name]) for p in unique)
    usage = Queries()
    for s in summaries:
        usage.add(s.usage)
    summary = SearchSummary(started_at=started_at, seconds=run.now(), device=evaluator.device,
                            endpoint=str(client.base_url), config=config, problems=summaries, usage=usage)
    (out / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n")
    return summary


def search_sync(problems: list[Problem], evaluator: Evaluator, client: AsyncOpenAI, config: SearchConfig,
                out: Path, **callbacks: Any) -> SearchSummary:
    """`search` for callers without an event loop."""
    return asyncio.run(search(problems, evaluator, client, config, out, **callbacks))
