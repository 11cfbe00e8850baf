"""What both `rooftop import` commands (KernelBench files, KernelBench-Hard folders) share: where
they write, and how their report ends."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from rooftop.cli.common import out

if TYPE_CHECKING:
    from rooftop.problem.imports import ImportReport

IntoOpt = Annotated[Path | None, typer.Option(
    "--into", metavar="DIR", help="deck root to write into (default: $ROOFTOP_DECKS, else "
                                  "~/.local/share/rooftop/decks)")]


def print_import_end(report: ImportReport, root: Path, deck: str) -> None:
    """The end of an import's report (`rooftop import ...`): what was skipped and why, what is
    true of every problem, and where the problems are and how to address them by name."""
    from rooftop.problem.registry import deck_roots

    for skipped in report.skipped:
        out.print(f"[red]skipped {escape(skipped.origin)}[/red]: {escape(skipped.reason)}", highlight=False)
    for common in report.notes:
        out.print(f"[dim]every problem: {escape(common)}[/dim]", highlight=False)
    addressed = any(root.resolve() == r.resolve() for r in deck_roots())
    count = len(report.imported)
    out.print(f"[dim]{count} problem{'' if count == 1 else 's'} under {escape(str(root / deck))}"
              + ("; `rooftop problems` lists them" if addressed else
                 f"; set ROOFTOP_DECKS={root} to address them by name") + "[/dim]", highlight=False)
