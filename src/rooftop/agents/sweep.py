"""`rooftop sweep CONFIG.yaml`: agents x models x problems x repeats, each run in its own folder.

    name: kernels-nov
    agents:
      - adapter: claude
        models: [claude-opus-4-7]
        env: [ANTHROPIC_API_KEY]
        timeout: 2700
    problems: [hard]            # deck names, problem names or folders
    repeats: 3                  # one run per cell is noise
    concurrency: 4              # agents at once; their GPU work queues in the service

A sweep is resumable: its runs are rows of the store (`agent_runs`) under the sweep's name, so
running it again starts only the cells without a finished run: a run that failed (the agent CLI
could not start, the harness broke) is started again, and a run the last invocation left
half-done (killed harness) is marked abandoned and started again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rooftop.agents.adapters import adapter
from rooftop.agents.record import AgentRun
from rooftop.agents.runner import AgentConfig, RunPlan, executable, run_agent
from rooftop.errors import UserError
from rooftop.problem.registry import resolve_many
from rooftop.problem.spec import Problem
from rooftop.service.evaluator import Evaluator
from rooftop.store.db import Store
from rooftop.vocabulary import DeviceChoice, SandboxKind, Settings
from rooftop.yamlfile import read_yaml


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, description="the sweep's name in the store (default: the file's name)")
    agents: list[AgentConfig] = Field(min_length=1)
    problems: list[str] = Field(min_length=1)
    repeats: int = Field(default=3, ge=1)
    concurrency: int = Field(default=2, ge=1, description="agent runs at once")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    sandbox: Literal["auto", "bwrap", "none"] = Field(default="auto", description="the evaluation child's sandbox")
    agent_sandbox: Literal["auto", "bwrap", "none"] = Field(default="auto", description="the agent's sandbox")
    workers: int | None = Field(default=None, ge=1, description="device workers of the evaluation service")
    timeout: float | None = Field(default=None, gt=0, description="evaluation gate timeout, seconds")
    out: Path = Path("runs")
    db: Path = Path("rooftop.db")


def load_config(path: Path) -> SweepConfig:
    if not path.is_file():
        raise UserError(f"{path}: no such sweep config")
    try:
        data = read_yaml(path)
    except Exception as exc:  # yaml's errors carry a position; one line of it is enough
        raise UserError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with agents and problems")
    try:
        config = SweepConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UserError(f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}") from None
    return config if config.name else config.model_copy(update={"name": path.stem})


def check_agents(agents: list[AgentConfig]) -> None:
    """Every agent's adapter exists and its CLI can be started: before any run, not in each."""
    for agent in agents:
        chosen = adapter(agent.adapter)
        executable(agent.executable or chosen.program(agent.args), agent.adapter)


def plans(config: SweepConfig, problems: list[Problem]) -> list[RunPlan]:
    return [RunPlan(agent=agent, model=model, problem=problem.name, repeat=rep, sweep=config.name)
            for agent in config.agents for model in _models(agent) for problem in problems
            for rep in range(config.repeats)]


def _models(agent: AgentConfig) -> list[str | None]:
    return list(agent.models) or [None]


def pending(config: SweepConfig, all_plans: list[RunPlan]) -> tuple[list[RunPlan], list[AgentRun]]:
    """The plans without a finished run in the store, and the finished runs; runs left
    `running` by an earlier invocation are marked abandoned. A sweep without a name (a single
    `rooftop agent run`) resumes nothing."""
    if config.name is None:
        return all_plans, []
    store = Store(config.db)
    try:
        done: dict[tuple[str, str | None, str, int], AgentRun] = {}
        for row in store.agent_runs.runs(config.name):
            run = AgentRun.model_validate_json(row.record_json)
            if row.state == "running":
                run.state = "abandoned"
                store.agent_runs.save(run.id, sweep=run.sweep, agent=run.agent, model=run.model, problem=run.problem,
                                      repeat=run.repeat, state=run.state, visible_job=None, graded_job=None,
                                      record_json=run.model_dump_json())
            elif row.state == "done":
                done[(run.agent, run.model, run.problem, run.repeat)] = run
    finally:
        store.close()
    return [p for p in all_plans if p.cell() not in done], [done[p.cell()] for p in all_plans if p.cell() in done]


def run_sweep(config: SweepConfig, *, on_run: Callable[[AgentRun], None] | None = None,
              on_start: Callable[[int, int], None] | None = None) -> list[AgentRun]:
    """Every cell of the sweep that has no finished run; all the sweep's runs, in plan order."""
    from rooftop.integrity.sandbox import require_isolation
    from rooftop.pipeline.evaluate import resolve_device

    require_isolation(config.sandbox, "an agent run's grading")
    require_isolation(config.agent_sandbox, "the agent", "--agent-sandbox")
    check_agents(config.agents)
    problems = [p for target in config.problems for p in resolve_many(target)]
    all_plans = plans(config, problems)
    todo, finished = pending(config, all_plans)
    if on_start:
        on_start(len(all_plans), len(finished))
    by_name = {p.name: p for p in problems}
    device = resolve_device(config.device)
    settings = Settings(device=DeviceChoice(device), timeout=config.timeout, sandbox=SandboxKind(config.sandbox))
    results = {(r.agent, r.model, r.problem, r.repeat): r for r in finished}
    lock = threading.Lock()
    with Evaluator(config.db, device, workers=config.workers) as evaluator:
        def one(plan: RunPlan) -> None:
            record = run_agent(plan, evaluator=evaluator, settings=settings, runs_dir=config.out, db=config.db,
                               agent_sandbox_kind=config.agent_sandbox, problem=by_name[plan.problem])
            with lock:
                results[plan.cell()] = record
            if on_run:
                on_run(record)

        with ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="rooftop-agent") as pool:
            for future in [pool.submit(one, plan) for plan in todo]:
                future.result()
    return [results[p.cell()] for p in all_plans if p.cell() in results]
