"""`rooftop import kernelbench`, `rooftop selfcheck` and `rooftop batch-kb`: KernelBench's problems
as decks, a deck's references checked against themselves, and a run of generations scored."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from rooftop.cli.common import (
    DeviceOpt,
    JsonOpt,
    Sandbox,
    SandboxOpt,
    ShapesOpt,
    TimeoutOpt,
    cli_app,
    out,
    progress_bar,
    settings_from_options,
)
from rooftop.cli.import_report import IntoOpt, print_import_end
from rooftop.errors import UserError
from rooftop.vocabulary import DeviceChoice

if TYPE_CHECKING:
    from rooftop.batch.kernelbench import SampleRow
    from rooftop.batch.selfcheck import SelfCheckRow
    from rooftop.problem.imports import Imported, ImportReport

import_app = cli_app("Import another benchmark's problems as decks.", no_args_is_help=True)

SourceArg = Annotated[Path, typer.Argument(
    metavar="PATH", help="KernelBench checkout (its KernelBench/level*/ folders), one level folder, "
                         "or a .parquet file of its dataset")]


def register(app: typer.Typer) -> None:
    from rooftop.cli.kernelbench_hard import import_hard_command

    import_app.command("kernelbench-hard")(import_hard_command)
    app.add_typer(import_app, name="import")
    app.command("selfcheck")(selfcheck_command)
    app.command("batch-kb")(batch_command)


@import_app.command("kernelbench")
def import_command(
    path: SourceArg,
    into: IntoOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Write each KernelBench file as problem kernelbench/level{L}/{file} of the user's decks."""
    from rooftop.problem.formats import FORMATS
    from rooftop.problem.registry import user_decks_root

    root, deck_format = into or user_decks_root(), FORMATS["kernelbench"]
    with progress_bar(not json_output) as bar:
        task = bar.add_task("import", total=None)

        def step(name: str, index: int, total: int) -> None:
            bar.update(task, description=f"counting {name}", completed=index, total=total)

        report = deck_format.import_deck(path, root, progress=step)
    if json_output:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    out.print(_import_table(report))
    for item in report.imported:
        if item.note("figures"):
            out.print(f"[yellow]{item.name}[/yellow]: no figures ({item.note('figures')})", highlight=False)
    print_import_end(report, root, str(deck_format.deck))


def _import_table(report: ImportReport) -> Table:
    table = Table(title=f"KernelBench imported into {report.root}", header_style="bold")
    for col in ("deck", "problems", "added", "updated", "unchanged", "compute", "memory", "no figures", "no smoke"):
        table.add_column(col, justify="left" if col == "deck" else "right")
    decks: dict[str, list[Imported]] = {}
    for item in report.imported:
        decks.setdefault(item.name.rsplit("/", 1)[0], []).append(item)
    for deck, items in decks.items():
        counted = [i for i in items if not i.note("figures")]
        table.add_row(deck, str(len(items)), *[_count(items, lambda i: i.change == "added"),
                                               _count(items, lambda i: i.change == "updated"),
                                               _count(items, lambda i: i.change == "unchanged")],
                      _count(counted, lambda i: i.regime == "compute"), _count(counted, lambda i: i.regime == "memory"),
                      _count(items, lambda i: bool(i.note("figures"))), _count(items, lambda i: bool(i.note("smoke"))))
    return table


def _count(items: list[Imported], match: Callable[[Imported], bool]) -> str:
    return str(sum(1 for i in items if match(i)))


def selfcheck_command(
    target: Annotated[str, typer.Argument(
        metavar="DECK|PROBLEM", help="a deck ('kernelbench/level1'), a folder of problem folders, or one problem")],
    device: DeviceOpt = DeviceChoice.auto,
    shapes: ShapesOpt = "auto",
    timeout: TimeoutOpt = None,
    sandbox: SandboxOpt = Sandbox.auto,
    tolerance: Annotated[float, typer.Option(
        "--tolerance", min=0.0, max=0.5, metavar="FRACTION",
        help="pass an interval that reaches 1.0 ± FRACTION (default 0: it must contain 1.0)")] = 0.0,
    json_output: JsonOpt = False,
    db: Annotated[Path | None, typer.Option("--db", metavar="FILE", help="also record the verdicts in this "
                                            "SQLite results database (default: record nothing)")] = None,
) -> None:
    """Evaluate each problem's reference as its own candidate: it must be correct, and on a GPU its
    speedup over eager must be 1.0 within its 95 % interval. Exit status 1 when one is not."""
    from rooftop.problem.registry import resolve_many

    problems = resolve_many(target)  # before torch is imported: a mistyped target is answered at once
    from rooftop.batch.selfcheck import selfcheck
    from rooftop.cli.kernelbench_hard import refuse_gpu_only
    from rooftop.cli.progress import event_display, verdict_lines
    from rooftop.store.db import Store

    settings = settings_from_options(device, shapes, timeout, None, True, sandbox)
    refuse_gpu_only(problems, settings)
    store = Store(db) if db else None
    lines = verdict_lines(not json_output, total=len(problems))
    try:
        with event_display(not json_output, total=len(problems)) as display:
            def finished(row: SelfCheckRow) -> None:
                lines.finished(row.problem, row.status, _selfcheck_note(row), display.elapsed())

            rows = selfcheck(problems, settings, store=store, progress=display, tolerance=tolerance, on_row=finished)
    finally:
        if store:
            store.close()
    if json_output:
        sys.stdout.write(json.dumps([r.model_dump(mode="json") for r in rows], indent=2) + "\n")
    else:
        out.print(_selfcheck_table(rows))
        failed = sum(1 for r in rows if not r.passed)
        unchecked = sum(1 for r in rows if r.passed and not r.interval_checked)
        out.print(f"{len(rows) - failed} of {len(rows)} pass"
                  + (f"; [bold red]{failed} fail[/bold red]" if failed else "")
                  + (f"; {unchecked} without a speedup check" if unchecked else ""))
    if any(not r.passed for r in rows):
        raise typer.Exit(1)


def _selfcheck_note(row: SelfCheckRow) -> str:
    """A row's check in a few words, for its line on a pipe: pass (with its speedup) or fail (why)."""
    from rooftop.cli.progress import NOTE_LIMIT, outcome_note
    from rooftop.errors import on_one_line

    if not row.passed:
        return f"fail: {on_one_line(row.reason, NOTE_LIMIT)}"
    check = "pass" if row.interval_checked else "pass unchecked"
    return check + (f", {outcome_note(row.speedup)}" if row.speedup is not None else "")


def _selfcheck_table(rows: list[SelfCheckRow]) -> Table:
    table = Table(title="selfcheck: each reference as its own candidate", header_style="bold")
    for col in ("problem", "status", "speedup [95 % interval]", "check", "reason"):
        table.add_column(col, justify="right" if col.startswith("speedup") else "left",
                         no_wrap=col not in ("reason", "speedup [95 % interval]"))
    for r in rows:
        speedups = "\n".join(
            (f"{s.shape} " if len(r.shapes) > 1 else "")
            + (f"{s.speedup:.3f}x" if s.speedup is not None else "-")
            + (f" [{s.low:.3f}, {s.high:.3f}]" if s.low is not None and s.high is not None else "")
            + (f" ({s.note})" if s.note else "")
            for s in r.shapes) or "-"
        check = Text("fail", style="bold red") if not r.passed else \
            Text("pass", style="bold green") if r.interval_checked else Text("pass (unchecked)", style="yellow")
        table.add_row(r.problem, r.status, speedups, check, Text(r.reason))
    return table


def batch_command(
    run_dir: Annotated[Path, typer.Argument(
        metavar="RUN_DIR", help="folder of generations named level_{L}_problem_{P}_sample_{S}_kernel.py")],
    kernelbench: Annotated[Path, typer.Option(
        "--kernelbench", metavar="PATH", help="KernelBench checkout, level folder or .parquet file the "
                                             "generations were written for")],
    device: DeviceOpt = DeviceChoice.auto,
    shapes: ShapesOpt = "auto",
    timeout: TimeoutOpt = None,
    sandbox: SandboxOpt = Sandbox.auto,
    json_output: JsonOpt = False,
    db: Annotated[Path, typer.Option("--db", metavar="FILE",
                                     help="SQLite results database (appended to)")] = Path("rooftop.db"),
) -> None:
    """Evaluate every generation of a KernelBench run and report KernelBench's figures from
    rooftop's measurements: compile and correctness rates, fast_p, geometric-mean speedup, pass@k."""
    from rooftop.batch.kernelbench import find_generations

    generations = find_generations(run_dir)  # before torch is imported
    if not kernelbench.exists():
        raise UserError(f"--kernelbench {kernelbench}: no such file or folder")
    from rooftop.batch.kernelbench import run_batch
    from rooftop.cli.progress import event_display, outcome_note, verdict_lines
    from rooftop.store.db import Store

    settings = settings_from_options(device, shapes, timeout, None, True, sandbox)
    store = Store(db)
    lines = verdict_lines(not json_output, total=len(generations))
    try:
        with event_display(not json_output, total=len(generations)) as display:
            def finished(row: SampleRow) -> None:
                name = f"{row.problem} sample {row.sample}" if row.problem else row.file
                lines.finished(name, row.status, outcome_note(row.speedup, row.reason), display.elapsed())

            report = run_batch(run_dir, kernelbench, settings, store=store, progress=display, on_row=finished)
    finally:
        store.close()
    if json_output:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    out.print(_samples_table(report["samples"]))  # type: ignore[arg-type]
    out.print(_figures_table(report))
    out.print(f"[dim]recorded in {db}[/dim]")


def _samples_table(samples: list[dict[str, Any]]) -> Table:
    from rooftop.cli.render import number

    table = Table(title="generations", header_style="bold")
    for col in ("file", "problem", "status", "compiled", "correct", "speedup", "reason"):
        table.add_column(col, justify="right" if col == "speedup" else "left",
                         no_wrap=col not in ("reason", "problem"))
    for s in samples:
        table.add_row(s["file"], s["problem"] or "-", s["status"], "yes" if s["compiled"] else "no",
                      "yes" if s["correct"] else "no", number(s["speedup"], "{:.3f}x"), Text(s["reason"]))
    return table


def _figures_table(report: dict[str, Any]) -> Table:
    from rooftop.score.kernelbench_metrics import FAST_P, fast_key

    table = Table(title=f"KernelBench figures over {report['n']} generations", header_style="bold")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("compile rate", f"{report['compile_rate']:.1%}")
    table.add_row("correctness rate (fast_0)", f"{report['correctness_rate']:.1%}")
    for p in FAST_P[1:]:
        table.add_row(f"fast_{p:g} (correct and > {p:g}x eager)", f"{report[fast_key(p)]:.1%}")
    geomean = report["geomean_speedup"]
    table.add_row("geomean speedup (correct only)", "-" if geomean is None else f"{geomean:.3f}x")
    for k, value in report["pass_at_k"].items():
        table.add_row(f"pass@{k}", f"{value:.1%}")
    return table
