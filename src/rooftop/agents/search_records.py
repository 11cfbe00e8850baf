"""What a tree search (agents/search.py) writes and reads: its configuration, its nodes, its
query counts and its summaries (pydantic, in `<out>/<problem>/nodes.jsonl` and `<out>/summary.json`),
and the pure parts of the search: naming a kernel by its syntax tree, picking a parent, a folder
per problem."""

from __future__ import annotations

import ast
import hashlib
import random
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from rooftop.transcripts.usage import Usage
from rooftop.vocabulary import Settings

if TYPE_CHECKING:
    from rooftop.problem.spec import Problem


class SearchConfig(BaseModel):
    """What a search may spend and how it picks parents; saved in summary.json (no secrets)."""

    model: str
    budget: int = Field(default=30, ge=1, description="model queries per problem, fixes included")
    branches: int = Field(default=4, ge=1, description="lines of work per problem at once")
    max_fix_attempts: int = Field(default=2, ge=0, description="fix queries per failed candidate")
    elite: float = Field(default=0.7, ge=0.0, le=1.0, description="chance a parent is drawn from the top_k")
    top_k: int = Field(default=3, ge=1)
    concurrency: int = Field(default=8, ge=1, description="model calls in flight over all problems")
    seed: int = 0
    temperature: float = Field(default=0.8, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    reward: str = "default"
    retries: int = Field(default=4, ge=0, description="further tries of a query after a transient error")
    backoff: float = Field(default=2.0, ge=0.0, description="seconds before the first retry; doubled each time")
    settings: Settings = Settings()  # evaluation settings; device and shapes are set by the search


class Node(BaseModel):
    """One model reply and what became of it: a line of nodes.jsonl."""

    id: int
    problem: str
    parent: int | None  # the correct node this line improves on; None: the reference
    fixes: int | None = None  # kind fix: the failed node it repairs
    duplicate_of: int | None = None  # same code as this earlier node: not evaluated again
    branch: int
    kind: Literal["draft", "improve", "fix"]
    query: int  # 1-based: the problem's query that produced it
    code_hash: str | None = None
    job: str | None = None
    status: str
    reward: float | None = None
    speedup: float | None = None
    error: str | None = None
    started_s: float  # seconds from the search's start to the query
    finished_s: float  # ... to this record
    llm_s: float = 0.0
    eval_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Queries(BaseModel):
    """What a search's model queries took: HTTP requests, retries, failed queries, and their tokens
    (prompt and completion only: that is all it reads of a reply's usage). summary.json has always
    written the tokens beside the counts, as `prompt_tokens` and `completion_tokens`, and still does."""

    requests: int = 0  # HTTP requests made, retries included
    retries: int = 0
    failed_queries: int = 0  # queries that got no reply after every retry
    tokens: Usage = Usage()

    @model_validator(mode="before")
    @classmethod
    def _from_summary(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("prompt_tokens" in data or "completion_tokens" in data):
            data = dict(data)
            data["tokens"] = Usage(input_tokens=data.pop("prompt_tokens", 0),
                                   output_tokens=data.pop("completion_tokens", 0))
        return data

    @model_serializer(mode="wrap")
    def _as_summary(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        written = handler(self)
        del written["tokens"]
        return {**written, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    @property
    def prompt_tokens(self) -> int:
        return self.tokens.input_tokens or 0

    @property
    def completion_tokens(self) -> int:
        return self.tokens.output_tokens or 0

    def add(self, other: Queries) -> None:
        self.requests += other.requests
        self.retries += other.retries
        self.failed_queries += other.failed_queries
        self.tokens = self.tokens + other.tokens


class Graded(BaseModel):
    """The best kernel's verdict on the graded shapes (held-out ones included)."""

    shapes: str
    job: str | None
    status: str
    reward: float | None = None
    speedup: float | None = None
    error: str | None = None


class ProblemSummary(BaseModel):
    problem: str
    folder: str  # under the search's folder
    budget: int
    queries: int
    nodes: int
    correct: int  # distinct correct kernels
    duplicates: int
    best: int | None = None  # node id
    best_code_hash: str | None = None
    best_reward: float | None = None  # on the run shapes
    best_speedup: float | None = None
    run_shapes: str
    graded: Graded | None = None
    usage: Queries = Queries()
    finished_s: float = 0.0  # seconds from the search's start to the last node


class SearchSummary(BaseModel):
    started_at: str
    seconds: float
    device: str
    endpoint: str
    config: SearchConfig
    problems: list[ProblemSummary]
    usage: Queries


def code_hash(code: str) -> str:
    """Names a kernel by its syntax tree when it parses, so that comments and layout do not count."""
    try:
        canonical = ast.dump(ast.parse(code))
    except (SyntaxError, ValueError):
        canonical = "\n".join(" ".join(line.split()) for line in code.splitlines() if line.strip())
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def select_parent(archive: list[Node], children: dict[int, int], rng: random.Random, elite: float,
                  top_k: int) -> Node | None:
    """Elite with probability `elite`, else the least-explored of the rest: exploits the best while
    lines keep spreading over other correct kernels. None (the reference) while nothing is correct."""
    if not archive:
        return None
    ranked = sorted(archive, key=lambda n: (-(n.reward or 0.0), n.id))
    top, rest = ranked[:top_k], ranked[top_k:]
    if not rest or rng.random() < elite:
        return rng.choice(top)
    fewest = min(children.get(n.id, 0) for n in rest)
    return rng.choice([n for n in rest if children.get(n.id, 0) == fewest])


def problem_folders(problems: Iterable[Problem]) -> dict[str, str]:
    """A folder per problem name: a deck's name as it is, else the spec's name, made unique."""
    folders: dict[str, str] = {}
    for problem in problems:
        base = problem.bundled_name or re.sub(r"[^A-Za-z0-9_.-]+", "_", problem.spec.name)
        name, n = base, 1
        while name in folders.values():
            n += 1
            name = f"{base}-{n}"
        folders[problem.name] = name
    return folders
