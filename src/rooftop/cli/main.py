"""The `rooftop` command. Thin: it parses arguments, calls the public API and prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rooftop.cli.common import (DbOpt, DeviceOpt, GraphsOpt, JsonOpt, SandboxOpt, ShapesOpt, TimeoutOpt, out,
                                progress_bar)
from rooftop.cli.measure import register as register_measure_commands
from rooftop.errors import UserError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="rooftop: build, check, time and score GPU kernels against the hardware roof.")
problems_app = typer.Typer(help="List bundled problems, or show one.", pretty_exceptions_enable=False)
app.add_typer(problems_app, name="problems")

def _settings(device: str, shapes: str, timeout: float, seed: int | None, timing: bool, sandbox: str,
              graphs: bool = False):
    from rooftop.pipeline.job import Settings

    choices = {"device": ("auto", "cpu", "cuda"), "shapes": ("auto", "visible", "held_out", "all", "smoke"),
               "sandbox": ("auto", "bwrap", "none")}
    for name, value in (("device", device), ("shapes", shapes), ("sandbox", sandbox)):
        if value not in choices[name]:
            raise UserError(f"--{name}: expected one of {', '.join(choices[name])} (got '{value}')")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError("--device cuda: no CUDA GPU is visible to torch on this machine")
    if sandbox == "bwrap":
        from rooftop.integrity.sandbox import require_bwrap

        require_bwrap()  # fail before any evaluation starts
    if graphs and device == "cpu":
        raise UserError("--graphs: CUDA graphs need a GPU (got --device cpu)")
    return Settings(device=device, shapes=shapes, timeout=timeout, seed=seed, timing=timing,
                    build_timeout=max(timeout, 900.0), sandbox=sandbox, graphs=graphs)


@app.command("eval")
def eval_command(
    problem: Annotated[str, typer.Argument(help="problem folder, KernelBench-style .py file, or bundled '<deck>/<name>'")],
    solution: Annotated[Path, typer.Argument(help="solution .py file or folder with solution.py")],
    device: DeviceOpt = "auto",
    shapes: ShapesOpt = "auto",
    timeout: TimeoutOpt = 180.0,
    seed: Annotated[int | None, typer.Option("--seed", help="base seed for reproducible inputs")] = None,
    timing: Annotated[bool, typer.Option("--timing/--no-timing", help="time correct solutions")] = True,
    sandbox: SandboxOpt = "auto",
    graphs: GraphsOpt = False,
    json_output: JsonOpt = False,
    db: DbOpt = Path("rooftop.db"),
) -> None:
    """Evaluate one solution of one problem and print the verdict."""
    from rooftop.cli.render import print_verdict
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.pipeline.scoring import attach_stored_baselines
    from rooftop.problem.registry import resolve
    from rooftop.solution.loader import load_solution
    from rooftop.store.db import Store

    spec = resolve(problem)
    sol = load_solution(solution)
    settings = _settings(device, shapes, timeout, seed, timing, sandbox, graphs)
    store = Store(db)
    with progress_bar(not json_output) as bar:
        task = bar.add_task(f"{spec.name}: {sol.path.name}", total=None)
        verdict = evaluate(spec, sol, settings, progress=lambda step: bar.update(task, description=f"{sol.path.name}: {step}"))
    stored = attach_stored_baselines(verdict, store)
    store.record(verdict)
    store.close()
    if json_output:
        sys.stdout.write(verdict.model_dump_json(indent=2) + "\n")
    else:
        print_verdict(verdict, out)
        if not stored and verdict.environment and verdict.environment.device == "cuda" and settings.timing:
            out.print(f"[dim]no stored torch.compile or SOTA baselines for this platform: "
                      f"`rooftop baselines {problem} --db {db}` times them once[/dim]")
        out.print(f"[dim]recorded in {db}[/dim]")


@app.command("demo")
def demo_command(
    deck: Annotated[str, typer.Option("--deck", help="bundled deck whose solutions to evaluate")] = "examples",
    device: DeviceOpt = "auto",
    shapes: ShapesOpt = "auto",
    timeout: TimeoutOpt = 30.0,
    sandbox: SandboxOpt = "auto",
    json_output: JsonOpt = False,
    db: DbOpt = Path("rooftop.db"),
) -> None:
    """Evaluate every bundled solution of a deck and print one table (the quick-start job)."""
    from rooftop.cli.render import summary_table
    from rooftop.pipeline.evaluate import evaluate, resolve_device
    from rooftop.pipeline.scoring import attach_stored_baselines
    from rooftop.problem.registry import bundled_names, expected_statuses, resolve
    from rooftop.solution.loader import load_solution
    from rooftop.store.db import Store

    names = bundled_names(deck)
    if not names:
        raise UserError(f"--deck: no bundled deck named '{deck}' (or it holds no problems)")
    settings = _settings(device, shapes, timeout, None, True, sandbox)
    jobs = []
    for name in names:
        problem = resolve(name)
        expected = expected_statuses(problem)
        for entry in _solution_entries(problem.root / "solutions"):
            jobs.append((problem, entry, expected.get(entry.name)))
    store = Store(db)
    store.start_run()
    rows = []
    dev = resolve_device(settings.device)
    with progress_bar(not json_output) as bar:
        task = bar.add_task("demo", total=len(jobs))
        for problem, entry, expected in jobs:
            bar.update(task, description=f"{problem.name}: {entry.name}")
            verdict = evaluate(problem, load_solution(entry), settings)
            attach_stored_baselines(verdict, store)
            store.record(verdict)
            rows.append((problem.name, entry.name, verdict, (expected or {}).get(dev)))
            bar.advance(task)
    store.close()
    if json_output:
        sys.stdout.write(json.dumps([json.loads(r[2].model_dump_json()) for r in rows], indent=2) + "\n")
        return
    out.print(summary_table(rows))
    mismatched = [r for r in rows if r[3] is not None and r[3] != r[2].status.value]
    out.print(f"{len(rows)} verdicts on {dev}, recorded in {db}"
              + (f"; [bold red]{len(mismatched)} differ from the expected status[/bold red]" if mismatched else
                 "; every status is the expected one"))
    for problem, name, verdict, _ in mismatched:
        out.print(f"[red]{problem}/{name}[/red]: {verdict.status.value}: {' | '.join(verdict.messages)[:400]}")


def _solution_entries(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if (p.suffix == ".py" and p.is_file()) or (p.is_dir() and (p / "solution.py").is_file()))


@problems_app.callback(invoke_without_command=True)
def problems_command(ctx: typer.Context, json_output: JsonOpt = False) -> None:
    """List the bundled problems."""
    if ctx.invoked_subcommand is not None:
        return
    from rooftop.problem.registry import bundled_names, resolve

    problems = [resolve(n) for n in bundled_names()]
    if json_output:
        sys.stdout.write(json.dumps([{"name": p.name, "title": p.spec.title, "version": p.spec.version,
                                      "dtype": p.spec.dtype, "regime": p.spec.regime,
                                      "shapes": {s: len(p.spec.select(s)) for s in ("visible", "held_out", "smoke")}}
                                     for p in problems], indent=2) + "\n")
        return
    table = Table(title="bundled problems", header_style="bold")
    for col in ("name", "title", "dtype", "regime", "visible", "held-out", "smoke", "version"):
        table.add_column(col)
    for p in problems:
        s = p.spec
        table.add_row(p.name, s.title, s.dtype, s.regime, str(len(s.select("visible"))),
                      str(len(s.select("held_out"))), str(len(s.smoke)), str(s.version))
    out.print(table)


@problems_app.command("show")
def problems_show(name: Annotated[str, typer.Argument(help="bundled name or path")], json_output: JsonOpt = False) -> None:
    """Show one problem: shapes, dtype, flops and bytes, tolerance and policy."""
    from rooftop.problem.registry import resolve

    problem = resolve(name)
    spec = problem.spec
    if json_output:
        sys.stdout.write(spec.model_dump_json(indent=2) + "\n")
        return
    out.print(f"[bold]{problem.name}[/bold] v{spec.version}: {spec.title}")
    out.print(spec.description.strip(), markup=False, highlight=False)
    tol = spec.tolerance_for(spec.dtype)
    out.print(f"dtype {spec.dtype} · regime {spec.regime} · flops {spec.flops or '-'} · bytes {spec.bytes or '-'}"
              + (f" · tolerance atol={tol.atol:g} rtol={tol.rtol:g} norm={tol.norm_bound:g}" if tol else " · exact"))
    table = Table(header_style="bold")
    for col in ("shape", "split", "params", "GFLOP", "MB", "note"):
        table.add_column(col)
    for shape in spec.all_shapes():
        flops, nbytes = spec.flops_for(shape), spec.bytes_for(shape)
        table.add_row(shape.name, shape.split.value, ", ".join(f"{k}={v}" for k, v in shape.params.items()),
                      "-" if flops is None else f"{flops / 1e9:.3g}", "-" if nbytes is None else f"{nbytes / 1e6:.3g}",
                      shape.note)
    out.print(table)
    policy = spec.policy
    out.print(f"policy: forbidden {', '.join(policy.forbidden) or 'nothing'}; torch ops "
              f"{'allowed' if policy.allow_torch_ops else 'not allowed'}")


register_measure_commands(app)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except Exception as exc:
        # our input errors, and the argument parser's usage errors (exit code 2): one line, no traceback
        usage = getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message")
        if not (isinstance(exc, UserError) or usage):
            if type(exc).__name__ == "Abort":
                sys.exit(130)
            raise
        message = " ".join((exc.format_message() if usage else str(exc)).split())
        if message:  # empty when the help was printed instead (no arguments at all)
            sys.stderr.write(f"rooftop: error: {message}\n")
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
