"""`rooftop import kernelbench-hard`: KernelBench-Hard's problem folders as the deck
`kernelbench-hard`, and the refusal to run its GPU-sized shapes on a CPU by default."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rooftop.cli.common import JsonOpt, out
from rooftop.cli.import_report import IntoOpt, print_import_end
from rooftop.errors import UserError

if TYPE_CHECKING:
    from rooftop.problem.imports import Imported, ImportReport
    from rooftop.problem.spec import Problem
    from rooftop.vocabulary import Settings


def import_hard_command(
    path: Annotated[Path, typer.Argument(
        metavar="PATH", help="KernelBench-Hard checkout, its problems/ folder, or one problem folder")],
    into: IntoOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Write each KernelBench-Hard problem folder as problem kernelbench-hard/<name> of the user's decks."""
    from rooftop.problem.formats import FORMATS
    from rooftop.problem.registry import user_decks_root

    root, deck_format = into or user_decks_root(), FORMATS["kernelbench_hard"]
    report = deck_format.import_deck(path, root)
    if json_output:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    out.print(_table(report))
    for item in report.imported:
        for note in item.notes:
            out.print(f"[yellow]{item.name}[/yellow] {escape(note.field)}: {escape(note.note)}", highlight=False)
    print_import_end(report, root, str(deck_format.deck))


def _table(report: ImportReport) -> Table:
    table = Table(title=f"KernelBench-Hard imported into {report.root}", header_style="bold")
    for col in ("problem", "change", "version", "dtype", "regime", "shapes", "flops", "bytes", "notes"):
        table.add_column(col, justify="right" if col in ("version", "shapes", "notes") else "left")
    for item in report.imported:
        table.add_row(item.name, item.change, str(item.version), item.dtype, item.regime, str(item.shapes),
                      _formula(item.flops, item, "flops"), _formula(item.bytes, item, "bytes"), str(len(item.notes)))
    return table


def _formula(formula: str | None, item: Imported, field: str) -> Text:
    if formula is not None:
        return Text("yes", style="green")
    dropped = any(n.field == field for n in item.notes)
    return Text("dropped", style="yellow") if dropped else Text("-")


def refuse_gpu_only(problems: list[Problem], settings: Settings) -> None:
    """The pipeline's own refusal (`select_shapes`), answered before torch is imported."""
    from rooftop.problem.spec import cpu_refusal

    if settings.shapes != "auto":
        return
    why = cpu_refusal(problems)
    if why is None:
        return
    from rooftop.pipeline.evaluate import resolve_device

    if resolve_device(settings.device) == "cpu":
        raise UserError(why)
