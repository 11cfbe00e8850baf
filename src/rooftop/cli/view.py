"""`rooftop view`: a run folder or a transcript as one HTML page that opens offline (viewer/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rooftop.cli.common import err, out


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)


def view_command(
    target: Annotated[Path, typer.Argument(metavar="RUN_DIR|TRANSCRIPT|RUNS_DIR",
                                           help="a run folder, a transcript file, or (with --index) a folder of runs")],
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="FILE",
                                                help="where the page goes (default: view.html in the run folder, "
                                                "the transcript's name with .html, or index.html)")] = None,
    index: Annotated[bool, typer.Option("--index", help="a page per run in the folder, and an index linking "
                                        "them with their verdicts")] = False,
) -> None:
    """Write the page of a run (transcript, solution, verdicts, ./check and ./bench calls), or an index of runs."""
    from rooftop.viewer.pages import write_index, write_run_page

    if index:
        written = write_index(target, output)
        out.print(str(written), highlight=False, markup=False, soft_wrap=True)  # one line, for scripts
        return
    written, partial = write_run_page(target, output)
    out.print(str(written), highlight=False, markup=False, soft_wrap=True)
    if partial:  # a page that is not a whole reading of its transcript is not a success
        err.print(f"rooftop view: {target}: partial page: {partial}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(1)
    err.print("open it in a browser: it needs nothing else")
