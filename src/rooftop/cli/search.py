"""`rooftop search`: tree search over kernel candidates with a model behind any OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from rooftop.cli.common import (
    DbOpt,
    Device,
    DeviceOpt,
    JsonOpt,
    Sandbox,
    SandboxOpt,
    TimeoutOpt,
    out,
    progress_bar,
    settings_from_options,
)
from rooftop.errors import UserError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from rooftop.agents.search_records import SearchConfig, SearchSummary
    from rooftop.problem.spec import Problem
    from rooftop.service.evaluator import Evaluator


def register(app: typer.Typer) -> None:
    app.command("search")(search_command)


def search_command(
    problems: Annotated[list[str], typer.Argument(
        metavar="PROBLEM", help="problem folders, deck problems ('<deck>/<name>') or whole decks")],
    model: Annotated[str, typer.Option("--model", metavar="NAME", help="the model to ask (required)")],
    base_url: Annotated[str | None, typer.Option("--base-url", metavar="URL",
                                                 help="OpenAI-compatible endpoint (else $OPENAI_BASE_URL)")] = None,
    api_key_env: Annotated[str, typer.Option("--api-key-env", metavar="VAR",
                                             help="environment variable holding the API key")] = "OPENAI_API_KEY",
    budget: Annotated[int, typer.Option("--budget", min=1, metavar="N",
                                        help="model queries per problem, fixes included")] = 30,
    branches: Annotated[int, typer.Option("--branches", min=1, metavar="N",
                                          help="lines of work per problem at once")] = 4,
    fix_attempts: Annotated[int, typer.Option("--fix-attempts", min=0, metavar="N",
                                              help="fix queries per failed candidate")] = 2,
    elite: Annotated[float, typer.Option("--elite", min=0.0, max=1.0, metavar="P",
                                         help="chance a parent is one of the top-k kernels (else the least "
                                         "explored of the others)")] = 0.7,
    top_k: Annotated[int, typer.Option("--top-k", min=1, metavar="K", help="size of the elite")] = 3,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, metavar="N",
                                             help="model calls in flight over all problems")] = 8,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="seed of parent selection")] = 0,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, max=2.0, metavar="T")] = 0.8,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", min=1, metavar="N",
                                                   help="reply length cap (default: the endpoint's)")] = None,
    output: Annotated[Path | None, typer.Option("--out", metavar="DIR",
                                                help="new folder for the lineage, code and summary "
                                                "(default: search/<timestamp>)")] = None,
    device: DeviceOpt = Device.auto,
    workers: Annotated[int | None, typer.Option("--workers", min=1, metavar="N", help="device workers (default: one "
                                                "per GPU; on a CPU, 1)")] = None,
    timeout: TimeoutOpt = None,
    sandbox: SandboxOpt = Sandbox.auto,
    json_output: JsonOpt = False,
    db: DbOpt = Path("rooftop.db"),
) -> None:
    """Search for fast kernels: each problem's budget of model queries is spent by parallel lines that
    improve kernels drawn from all the correct ones found so far; the best is then graded on every shape."""
    chosen, key, folder = _search_inputs(problems, api_key_env, output)
    settings = settings_from_options(device, "auto", timeout, None, True, sandbox)

    import openai

    from rooftop.agents.search_records import SearchConfig
    from rooftop.pipeline.evaluate import resolve_device
    from rooftop.service.evaluator import Evaluator

    config = SearchConfig(model=model, budget=budget, branches=branches, max_fix_attempts=fix_attempts, elite=elite,
                          top_k=top_k, concurrency=concurrency, seed=seed, temperature=temperature,
                          max_tokens=max_tokens, settings=settings)
    client = openai.AsyncOpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None, api_key=key,
                                max_retries=0)  # the search retries, with its own backoff
    with Evaluator(db, resolve_device(settings.device), workers=workers) as ev:
        summary = _searched(chosen, ev, client, config, folder, json_output)
    _print(summary, folder, db, json_output)


def _print(summary: SearchSummary, folder: Path, db: Path, json_output: bool) -> None:
    """The summary as JSON, or its table and what the search spent and where it wrote."""
    if json_output:
        sys.stdout.write(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n")
        return
    out.print(_table(summary))
    usage = summary.usage
    out.print(f"{usage.prompt_tokens} prompt and {usage.completion_tokens} completion tokens in {usage.requests} "
              f"requests, {summary.seconds:.0f} s; lineage, code and summary.json in {folder}; verdicts in {db}",
              highlight=False)


def _searched(chosen: list[Problem], ev: Evaluator, client: AsyncOpenAI, config: SearchConfig, folder: Path,
              json_output: bool) -> SearchSummary:
    """The search, under a bar of model queries spent, with a line per problem as it finishes."""
    from rooftop.agents.search import search_sync

    with progress_bar(not json_output) as bar:
        task = bar.add_task(f"searching {len(chosen)} problem{'s' * (len(chosen) != 1)}",
                            total=config.budget * len(chosen))
        return search_sync(chosen, ev, client, config, folder,
                           on_node=lambda problem, node: bar.advance(task),
                           on_problem=None if json_output else lambda done: bar.console.print(
                               f"{done.problem}: {done.correct} correct of {done.nodes}, graded "
                               f"{done.graded.status if done.graded else '-'}", highlight=False))


def _search_inputs(problems: list[str], api_key_env: str, output: Path | None) -> tuple[list[Problem], str, Path]:
    """The problems (each once), the API key and the output folder, or a one-line error naming the
    argument, before anything starts."""
    from rooftop.problem.registry import resolve_many

    found: dict[str, Problem] = {}
    for target in problems:
        for problem in resolve_many(target):
            found.setdefault(problem.name, problem)
    key = os.environ.get(api_key_env)
    if not key:
        raise UserError(f"--api-key-env {api_key_env}: the variable is not set (set it, or name another)")
    folder = output or Path("search") / datetime.now().strftime("%Y%m%d-%H%M%S")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"--out {folder}: already exists and is not an empty folder")
    return list(found.values()), key, folder


def _table(summary: SearchSummary) -> Table:
    from rooftop.cli.render import number, ratio

    first = summary.problems[0]
    graded_on = first.graded.shapes if first.graded else "all"
    table = Table(title="rooftop search", header_style="bold",
                  caption=f"reward, speedup: the best kernel on the {first.run_shapes} shapes; graded: on {graded_on}")
    for col in ("problem", "queries", "nodes", "correct", "dup", "best", "reward", "speedup", "graded", "graded x"):
        table.add_column(col, justify="left" if col in ("problem", "graded") else "right")
    for p in summary.problems:
        graded = p.graded
        table.add_row(p.problem, f"{p.queries}/{p.budget}", str(p.nodes), str(p.correct), str(p.duplicates),
                      "-" if p.best is None else f"#{p.best}", number(p.best_reward, "{:+.3f}"),
                      ratio(p.best_speedup), graded.status if graded else "-",
                      ratio(graded.speedup if graded else None))
    return table

