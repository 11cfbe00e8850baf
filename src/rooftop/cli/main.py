"""The `rooftop` command. Thin: it parses arguments, calls the public API and prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from rooftop.cli.agents import register as register_agent_commands
from rooftop.cli.batch import register as register_batch_commands
from rooftop.cli.common import (
    DbOpt,
    Device,
    DeviceOpt,
    GraphsOpt,
    JsonOpt,
    Sandbox,
    SandboxOpt,
    SeedOpt,
    ShapesOpt,
    TimeoutOpt,
    TimingOpt,
    cli_app,
    err,
    out,
    settings_from_options,
)
from rooftop.cli.kernelbench import register as register_kernelbench_commands
from rooftop.cli.measure import register as register_measure_commands
from rooftop.cli.prompt import register as register_prompt_commands
from rooftop.cli.report import register as register_report_commands
from rooftop.cli.results import register as register_results_commands
from rooftop.cli.search import register as register_search_commands
from rooftop.cli.serve import register as register_serve_commands
from rooftop.cli.view import register as register_view_commands
from rooftop.errors import UserError

if TYPE_CHECKING:
    from rooftop.problem.spec import Problem
    from rooftop.service.evaluator import Result
    from rooftop.service.inputs import Submission
    from rooftop.solution.loader import Solution
    from rooftop.verdict import Verdict
    from rooftop.vocabulary import EventSink, Settings

app = cli_app("rooftop: build, check, time and score GPU kernels against the hardware roof.", no_args_is_help=True)
problems_app = cli_app("List the problems (bundled and imported decks), or show one.")
app.add_typer(problems_app, name="problems")


def _print_version(value: bool) -> None:
    if value:
        from rooftop.environment import rooftop_version

        sys.stdout.write(f"rooftop {rooftop_version()}\n")
        raise typer.Exit()


@app.callback()
def rooftop_command(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="print the version and exit")] = False,
) -> None:
    """Options that come before any command; the app's help text is the one shown."""


def _warn_unsandboxed(sandbox: Sandbox) -> None:
    """`eval` and `demo` run the user's own code: `auto` may fall back to no sandbox, said first."""
    from rooftop.integrity.sandbox import unsandboxed_warning

    warning = unsandboxed_warning() if sandbox is Sandbox.auto else None
    if warning:
        err.print(f"[bold red]{warning}[/]")


def _start_child_ahead(problem: Problem, solution: Solution, device: Device, sandbox: Sandbox) -> None:
    """Start the evaluation's child before this process imports torch, so that both processes
    import it at once (seconds each on a fresh GPU machine). Where 'auto' turns out to mean another
    device than the one guessed here, the child is simply not used."""
    import glob

    from rooftop.pipeline.trusted.spawn import prestart

    guessed = device.value if device is not Device.auto else ("cuda" if glob.glob("/dev/nvidia[0-9]*") else "cpu")
    prestart(problem, solution, guessed, sandbox.value)


@app.command("eval")
def eval_command(
    problem: Annotated[str, typer.Argument(
        metavar="PROBLEM", help="problem folder, KernelBench-style .py file, or bundled '<deck>/<name>'")],
    solution: Annotated[Path, typer.Argument(metavar="SOLUTION", help="solution .py file or folder with solution.py")],
    device: DeviceOpt = Device.auto,
    shapes: ShapesOpt = "auto",
    timeout: TimeoutOpt = None,
    seed: SeedOpt = None,
    timing: TimingOpt = True,
    sandbox: SandboxOpt = Sandbox.auto,
    graphs: GraphsOpt = False,
    json_output: JsonOpt = False,
    db: DbOpt = Path("rooftop.db"),
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="also print where the time went, phase by "
                                          "phase")] = False,
) -> None:
    """Evaluate one solution of one problem and print the verdict."""
    # the paths are checked before the evaluation pipeline (and torch with it) is imported, so a
    # mistyped path is answered at once; both loaders are light
    from rooftop.problem.registry import resolve
    from rooftop.solution.loader import load_solution

    spec = resolve(problem)
    sol = load_solution(solution)
    _warn_unsandboxed(sandbox)
    _start_child_ahead(spec, sol, device, sandbox)
    from rooftop.api import run_evaluation
    from rooftop.cli.progress import event_display
    from rooftop.cli.render import print_verdict
    from rooftop.store.db import Store

    settings = settings_from_options(device, shapes, timeout, seed, timing, sandbox, graphs)
    from rooftop.cli.kernelbench_hard import refuse_gpu_only

    refuse_gpu_only([spec], settings)
    from rooftop.environment import process_age

    before = process_age()  # this process's start, its imports and loading the problem
    store = Store(db)
    try:
        with event_display(not json_output) as display:
            verdict = run_evaluation(spec, sol, settings, store=store,
                                     events=display.start(f"{spec.spec.name}/{sol.path.name}"))
    finally:
        store.close()
    if json_output:
        sys.stdout.write(verdict.model_dump_json(indent=2) + "\n")
        return
    print_verdict(verdict, out)
    if verbose:
        from rooftop.cli.render import phase_table

        out.print(f"[dim]{before:.2f} s from this process's start to the evaluation (interpreter, imports, "
                  "loading the problem)[/dim]")
        out.print(phase_table(verdict))
    stored = any(r.baselines for r in verdict.shapes)
    if not stored and verdict.environment and verdict.environment.device == "cuda" and settings.timing:
        out.print(f"[dim]no stored torch.compile or SOTA baselines for this platform: "
                  f"`rooftop baselines {problem} --db {db}` times them once[/dim]")
    out.print(f"[dim]recorded in {db}[/dim]")


DEMO_GPU_TIMEOUT = 10.0  # seconds a gate of the demo may take on a GPU, when --timeout is not given


@app.command("demo")
def demo_command(
    deck: Annotated[str, typer.Option("--deck", metavar="DECK",
                                      help="bundled deck whose solutions to evaluate")] = "examples",
    device: DeviceOpt = Device.auto,
    shapes: ShapesOpt = "auto",
    timeout: TimeoutOpt = None,
    sandbox: SandboxOpt = Sandbox.auto,
    json_output: JsonOpt = False,
    db: DbOpt = Path("rooftop.db"),
) -> None:
    """Evaluate every bundled solution of a deck and print one table (the quick-start job). When
    stdout is not a terminal, a line per verdict comes first, as each finishes."""
    from rooftop.pipeline.evaluate import resolve_device
    from rooftop.problem.registry import bundled_names

    names = bundled_names(deck)
    if not names:
        raise UserError(f"--deck: no bundled deck named '{deck}' (or it holds no problems)")
    _warn_unsandboxed(sandbox)
    settings = settings_from_options(device, shapes, timeout, None, True, sandbox)
    dev = resolve_device(settings.device)
    if timeout is None and dev == "cuda":
        # the deck's calls take milliseconds and a shape's gate at most a few seconds: its hanging
        # example is cut off after ten, not the two minutes a GPU shape gets by default
        settings = settings.model_copy(update={"timeout": DEMO_GPU_TIMEOUT})
    rows = _demo_run(_demo_jobs(names, dev), settings, db, json_output)
    if json_output:
        sys.stdout.write(json.dumps([json.loads(r[2].model_dump_json()) for r in rows], indent=2) + "\n")
        return
    _demo_report(rows, dev, db)


def _demo_jobs(names: list[str], dev: str) -> list[tuple[Submission, str, str | None]]:
    """Each bundled solution of the deck's problems: its submission, the name it is shown by, and
    the status its deck expects on this device."""
    from rooftop.problem.registry import expected_statuses, resolve
    from rooftop.service.inputs import Submission
    from rooftop.service.jobs import SourceSnapshot
    from rooftop.solution.loader import load_solution, solution_entries

    jobs = []
    for problem in map(resolve, names):
        statuses = expected_statuses(problem)
        for entry in solution_entries(problem.root / "solutions"):
            solution = load_solution(entry)
            submission = Submission(problem=problem, source=SourceSnapshot.of(solution), label=str(solution.path))
            jobs.append((submission, f"{problem.name}/{entry.name}", (statuses.get(entry.name) or {}).get(dev)))
    return jobs


def _demo_run(jobs: list[tuple[Submission, str, str | None]], settings: Settings, db: Path,
              json_output: bool) -> list[tuple[str, str, Verdict, str | None]]:
    """The demo's evaluations, one after another in this process (`run_many`'s inline backend),
    each shown as it runs and given its line as it finishes; judged afresh every time."""
    import time

    from rooftop.cli.progress import event_display, expected_note, verdict_lines
    from rooftop.service.many import run_many
    from rooftop.store.db import Store

    store = Store(db)
    store.evaluations.start_run()
    lines = verdict_lines(not json_output, total=len(jobs))
    started: dict[int, float] = {}
    try:
        with event_display(not json_output, total=len(jobs)) as display:
            def start(index: int) -> EventSink:
                started[index] = time.monotonic()
                return display.start(jobs[index][1])

            def finished(index: int, result: Result) -> None:
                verdict = _verdict_or_raise(result)
                _, label, wanted = jobs[index]
                lines.finished(label, verdict.status.value, expected_note(verdict.status.value, wanted),
                               time.monotonic() - started.get(index, time.monotonic()))
                display.advance()

            results = run_many([job[0] for job in jobs], settings, store=store, again=True, on_start=start,
                               on_result=finished)
    finally:
        store.close()
    return [(submission.problem.name, Path(submission.label).name, _verdict_or_raise(result), wanted)
            for (submission, _, wanted), result in zip(jobs, results, strict=True)]


def _verdict_or_raise(result: Result) -> Verdict:
    """The job's verdict; where none was made, its error, raised as `run_evaluation` would have."""
    from rooftop.service.worker import BUG

    if result.verdict is not None:
        return result.verdict
    error = result.error or "no verdict was made"
    raise RuntimeError(error) if error.startswith(BUG) else UserError(error)


def _demo_report(rows: list[tuple[str, str, Verdict, str | None]], dev: str, db: Path) -> None:
    """The demo's table, and each verdict whose status is not the one its deck expects."""
    from rooftop.cli.render import summary_table

    out.print(summary_table(rows))
    mismatched = [r for r in rows if r[3] is not None and r[3] != r[2].status.value]
    out.print(f"{len(rows)} verdicts on {dev}, recorded in {db}"
              + (f"; [bold red]{len(mismatched)} {'differs' if len(mismatched) == 1 else 'differ'} from the expected "
                 "status[/bold red]" if mismatched else
                 "; every status is the expected one"))
    for problem_name, name, verdict, _ in mismatched:
        out.print(f"[red]{problem_name}/{name}[/red]: {verdict.status.value}: {' | '.join(verdict.messages)[:400]}",
                  soft_wrap=True)


@problems_app.callback(invoke_without_command=True)
def problems_command(ctx: typer.Context, json_output: JsonOpt = False) -> None:
    """List the problems of the bundled and imported decks."""
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
    out.print(_problems_table(problems))


def _problems_table(problems: list[Problem]) -> Table:
    # the title sits under the name, so an 80-column terminal keeps every column readable
    table = Table(title="problems", header_style="bold", caption="shapes: visible / held-out / smoke")
    table.add_column("problem")
    for col in ("dtype", "regime", "shapes", "version"):
        table.add_column(col, no_wrap=True, justify="right" if col in ("shapes", "version") else "left")
    for p in problems:
        s = p.spec
        table.add_row(Text.assemble((p.name, "bold"), "\n", (s.title, "dim")), s.dtype, s.regime,
                      f"{len(s.select('visible'))} / {len(s.select('held_out'))} / {len(s.smoke)}", str(s.version))
    return table


@problems_app.command("show")
def problems_show(name: Annotated[str, typer.Argument(metavar="NAME", help="bundled name or path")],
                  json_output: JsonOpt = False) -> None:
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
    for col in ("shape", "split", "params", "GFLOP", "MB", "note"):  # on a narrow terminal params and note wrap
        table.add_column(col, no_wrap=col not in ("params", "note"),
                         justify="right" if col in ("GFLOP", "MB") else "left")
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
register_results_commands(app)
register_kernelbench_commands(app)
register_batch_commands(app)
register_serve_commands(app)
register_agent_commands(app)
register_search_commands(app)
register_view_commands(app)
register_report_commands(app)
register_prompt_commands(app)


def main() -> None:
    """The CLI, once `rooftop.cli.entry` has set up bytecode (the `rooftop` command's entry point)."""
    from rooftop.integrity.environ import undumpable

    undumpable()  # the trusted side of what it runs: its memory and environment closed to its own user's processes
    try:
        code = app(prog_name="rooftop", standalone_mode=False)
    except Exception as exc:
        # our input errors, and the argument parser's usage errors (exit code 2): one line, no traceback
        usage = _usage_message(exc)
        if not (isinstance(exc, UserError) or usage is not None):
            if type(exc).__name__ == "Abort":
                sys.exit(130)
            raise
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `rooftop`: its "message" is the help
            sys.stdout.write(f"{usage}\n")
            sys.exit(2)
        message = " ".join((usage if usage is not None else str(exc)).split())
        if message:  # empty when a rich-mode sub-app printed its help screen instead
            _report_user_error(message)
        sys.exit(2)
    _leave(code if isinstance(code, int) else 0)


def _leave(code: int) -> None:
    """Exit without the interpreter's teardown once the command's work is done: the exit handlers
    run (unclaimed children are stopped, files closed), but freeing every module and tearing down
    a CUDA context that held gigabytes takes a one-shot verdict most of a second for nothing."""
    import atexit
    import os

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _usage_message(exc: Exception) -> str | None:
    """The parser's message when `exc` is one of its usage errors (exit code 2), else None."""
    format_message = getattr(exc, "format_message", None)
    if getattr(exc, "exit_code", None) == 2 and callable(format_message):
        return str(format_message()).replace("Value error, ", "")  # pydantic's prefix, from typer's enum check
    return None


def _report_user_error(message: str) -> None:
    """One line on stderr; with --json also a JSON document on stdout, so a caller that parses
    stdout gets an answer it can read instead of nothing."""
    sys.stderr.write(f"rooftop: error: {message}\n")
    if "--json" in sys.argv[1:]:
        sys.stdout.write(json.dumps({"error": message, "exit_code": 2}) + "\n")

