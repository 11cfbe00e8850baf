"""`rooftop sweep` and `rooftop agent ...`: coding agents in sandboxed workspaces, graded on
shapes they never saw (agents/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from rooftop.cli.common import DbOpt, Device, DeviceOpt, JsonOpt, Sandbox, SandboxOpt, cli_app, err, out, progress_bar
from rooftop.errors import UserError

if TYPE_CHECKING:
    from rooftop.agents.record import AgentRun, Grade
    from rooftop.agents.runner import AgentConfig
    from rooftop.agents.sweep import SweepConfig

agent_app = cli_app("Run one coding agent on one problem in a sandboxed workspace, or list the agent adapters.")

OutOpt = Annotated[Path | None, typer.Option("--out", metavar="DIR", help="where run folders go (default: runs)")]
AgentSandboxOpt = Annotated[Sandbox, typer.Option("--agent-sandbox", help="how the agent process is isolated "
                                                  "(auto: bwrap when installed)")]
TimeoutS = Annotated[float, typer.Option("--timeout", min=1.0, metavar="SECONDS",
                                         help="wall-clock budget of the agent")]
TurnsOpt = Annotated[int | None, typer.Option("--max-turns", min=1, metavar="N",
                                              help="turn limit, where the agent supports one")]


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_command)
    app.add_typer(agent_app, name="agent")


def sweep_command(
    config: Annotated[Path, typer.Argument(metavar="CONFIG.yaml", help="agents, models, problems, repeats")],
    db: Annotated[Path | None, typer.Option("--db", metavar="FILE", help="results database (default: the "
                                            "config's db, else rooftop.db)")] = None,
    out_dir: OutOpt = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, metavar="N",
                                                    help="agent runs at once (default: the config's)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run agents x models x problems x repeats; cells with a finished run in the database are
    skipped, so running it again resumes it."""
    from rooftop.agents.sweep import load_config

    loaded = load_config(config)
    updates = {k: v for k, v in (("db", db), ("out", out_dir), ("concurrency", concurrency)) if v is not None}
    _run(loaded.model_copy(update=updates), as_json)


@agent_app.command("run")
def agent_run_command(
    problem: Annotated[str, typer.Argument(metavar="PROBLEM", help="a problem name or folder")],
    adapter: Annotated[str, typer.Option("--adapter", metavar="NAME", help="the agent CLI (rooftop agent list)")],
    model: Annotated[str | None, typer.Option("--model", metavar="MODEL", help="the model the agent runs with "
                                              "(default: its CLI's own)")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", metavar="NAME", help="an environment variable to pass "
                                                  "to the agent (its API key); repeatable")] = None,
    arg: Annotated[list[str] | None, typer.Option("--arg", metavar="ARG", help="an extra argument for the CLI; "
                                                  "repeatable (the command adapter: every argument after its "
                                                  "program, with {prompt_file}, {model}, {workspace} filled in)")
                   ] = None,
    executable: Annotated[str | None, typer.Option("--executable", metavar="PATH", help="the agent CLI to start "
                                                   "(default: the adapter's, on PATH; the command adapter: its "
                                                   "program)")] = None,
    endpoint: Annotated[list[str] | None, typer.Option(
        "--endpoint", metavar="HOST:PORT", help="what the agent may reach from its sandbox instead of its provider "
        "(a URL, or '*' for the host's network); repeatable")] = None,
    timeout: TimeoutS = 2700.0,
    max_turns: TurnsOpt = None,
    device: DeviceOpt = Device.auto,
    sandbox: SandboxOpt = Sandbox.auto,
    agent_sandbox: AgentSandboxOpt = Sandbox.auto,
    db: DbOpt = Path("rooftop.db"),
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One run: a fresh workspace, the agent under its budget, then grading on every shape."""
    from pydantic import ValidationError

    from rooftop.agents.runner import AgentConfig

    try:
        agent = AgentConfig(adapter=adapter, models=[model] if model else [], env=env or [], args=arg or [],
                            executable=executable, endpoints=endpoint or [], timeout=timeout, max_turns=max_turns)
    except ValidationError as exc:
        error = exc.errors()[0]
        flag = {"endpoints": "--endpoint"}.get(str(error["loc"][0]) if error["loc"] else "", "--adapter command")
        raise UserError(f"{flag}: {error['msg'].removeprefix('Value error, ')}") from None
    _run(_single(agent, problem, device, sandbox, agent_sandbox, db, out_dir), as_json)


@agent_app.command("llm")
def agent_llm_command(
    problem: Annotated[str, typer.Argument(metavar="PROBLEM", help="a problem name or folder")],
    model: Annotated[str, typer.Option("--model", metavar="MODEL", help="the model name the endpoint serves")],
    base_url: Annotated[str | None, typer.Option("--base-url", metavar="URL", help="an OpenAI-compatible endpoint "
                                                 "(default: $OPENAI_BASE_URL)")] = None,
    api_key_env: Annotated[str, typer.Option("--api-key-env", metavar="NAME",
                                             help="the environment variable holding the key")] = "OPENAI_API_KEY",
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, metavar="N", help="model calls")] = 20,
    timeout: TimeoutS = 2700.0,
    device: DeviceOpt = Device.auto,
    sandbox: SandboxOpt = Sandbox.auto,
    agent_sandbox: AgentSandboxOpt = Sandbox.auto,
    db: DbOpt = Path("rooftop.db"),
    out_dir: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """rooftop's own agent over any OpenAI-compatible endpoint (tools: run_kernel, read_file, finish),
    in a sandboxed workspace like any other agent, graded on every shape."""
    from rooftop.agents.runner import AgentConfig

    args = ["--api-key-env", api_key_env, *(["--base-url", base_url] if base_url else [])]
    agent = AgentConfig(adapter="llm", models=[model], env=[api_key_env, "OPENAI_BASE_URL"], args=args,
                        timeout=timeout, max_turns=max_turns)
    _run(_single(agent, problem, device, sandbox, agent_sandbox, db, out_dir), as_json)


@agent_app.command("list")
def agent_list_command(as_json: JsonOpt = False) -> None:
    """The agent adapters, and whether their CLI is on PATH here."""
    import shutil

    from rooftop.agents.adapters import adapter, adapter_names

    rows = [{"adapter": n, "executable": adapter(n).executable, "found": bool(adapter(n).executable and
                                                                            shutil.which(adapter(n).executable)),
             "key_env": list(adapter(n).key_env), "max_turns": adapter(n).supports_max_turns}
            for n in adapter_names()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table("adapter", "executable", "on PATH", "key variables", "turn limit")
    for r in rows:
        table.add_row(str(r["adapter"]), str(r["executable"] or "(the command)"), "yes" if r["found"] else "no",
                      ", ".join(r["key_env"]) or "-", "yes" if r["max_turns"] else "no")  # type: ignore[arg-type]
    out.print(table)


def _single(agent: AgentConfig, problem: str, device: Device, sandbox: Sandbox, agent_sandbox: Sandbox, db: Path,
            out_dir: Path | None) -> SweepConfig:
    """A sweep of one run and no name: nothing to resume."""
    from rooftop.agents.sweep import SweepConfig

    return SweepConfig(agents=[agent], problems=[problem], repeats=1, concurrency=1, device=device.value,
                       sandbox=sandbox.value, agent_sandbox=agent_sandbox.value, db=db, out=out_dir or Path("runs"))


def _run(config: SweepConfig, as_json: bool) -> None:
    from rooftop.agents.sweep import run_sweep

    with progress_bar(not as_json) as bar:
        task = bar.add_task("agent runs", total=None)

        def started(total: int, done: int) -> None:
            bar.update(task, total=total, completed=done)
            if done and not as_json:
                err.print(f"resuming sweep {config.name}: {done} of {total} runs already finished")

        def finished(record: AgentRun) -> None:
            bar.advance(task)
            if not as_json:
                err.print(f"{record.id}: {record.state}, graded {record.graded.status if record.graded else '-'}")

        runs = run_sweep(config, on_run=finished, on_start=started)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
        return
    out.print(runs_table(runs))
    if runs:
        out.print(f"run folders under {Path(runs[0].folder).parent}; records in {config.db} (agent_runs)")


def runs_table(runs: list[AgentRun]) -> Table:
    table = Table("agent", "model", "problem", "rep", "exit", "done", "wall s", "checks", "visible", "graded",
                  "held-out", "tokens in/out", "cost $")
    for r in runs:
        held = (f"{r.graded.held_out_correct}/{r.graded.held_out_shapes}" if r.graded and r.graded.held_out_shapes
                else "-")
        tokens = (f"{r.usage.input_tokens or 0}/{r.usage.output_tokens or 0}"
                  if r.usage.input_tokens is not None or r.usage.output_tokens is not None else "-")
        table.add_row(r.agent, r.model or "-", r.problem, str(r.repeat),
                      "killed" if r.timed_out else str(r.exit_code), "yes" if r.completed else "no",
                      f"{r.wall_s:.0f}" if r.wall_s is not None else "-", f"{r.checks}+{r.benches}",
                      _grade_cell(r.visible, r.error), _grade_cell(r.graded, r.error), held, tokens,
                      f"{r.usage.cost_usd:.2f}" if r.usage.cost_usd is not None else "-")
    return table


def _grade_cell(grade: Grade | None, error: str | None) -> str:
    if grade is None:
        return error or "-"
    return grade.status + (f" {grade.speedup:.3g}x" if grade.speedup else "")
