"""`rooftop report` and `rooftop annotate`: a leaderboard of the results database, and audit notes
on agent runs that the leaderboard marks."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from rooftop.cli.common import JsonOpt, out
from rooftop.errors import UserError

if TYPE_CHECKING:
    from rooftop.report.annotations import Annotation
    from rooftop.store.db import Store

ReadDbOpt = Annotated[Path, typer.Option("--db", metavar="FILE", help="SQLite results database (never created)")]


class AuditChoice(StrEnum):
    clean = "clean"
    rubric_leak = "rubric_leak"
    reward_hack = "reward_hack"
    interesting = "interesting"
    bug = "bug"


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
    app.command("annotate")(annotate_command)


def report_command(
    deck: Annotated[str | None, typer.Option("--deck", metavar="NAME", help="only the problems of this deck "
                                             "(nested decks included)")] = None,
    sweep: Annotated[str | None, typer.Option("--sweep", metavar="NAME", help="only this sweep's agent runs")] = None,
    db: ReadDbOpt = Path("rooftop.db"),
    out_dir: Annotated[Path, typer.Option("-o", "--out", metavar="DIR", help="where leaderboard.md, .html, "
                                          ".json and plots/ go")] = Path("report"),
    json_output: JsonOpt = False,
) -> None:
    """A leaderboard of the finished agent runs (agent x model by problem; with no agent runs, the
    evaluations grouped by language), with reference rows for eager, torch.compile and SOTA, and
    roofline, fast_p and speedup plots."""
    from rooftop.report.render import tables
    from rooftop.report.writer import FILES, write_report

    store = _open(db)
    try:
        board = write_report(store, out_dir, deck=deck, sweep=sweep)
    finally:
        store.close()
    if json_output:
        sys.stdout.write(board.model_dump_json(indent=2) + "\n")
        return
    main = tables(board)[0]
    table = Table(title=f"leaderboard of {db}", caption=main.note, header_style="bold", title_justify="left",
                  caption_justify="left")
    for i, header in enumerate(main.headers):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for i, row in enumerate(main.rows):
        table.add_row(*row, end_section=i + 1 in main.separators)
    out.print(table)
    out.print(f"wrote {', '.join(str(out_dir / f) for f in FILES)} and {len(board.plots)} plots "
              f"(PNG and SVG) in {out_dir / 'plots'}", highlight=False, soft_wrap=True)


def annotate_command(
    run: Annotated[str, typer.Argument(metavar="RUN", help="an agent run's id, or its run folder")],
    verdict: Annotated[AuditChoice | None, typer.Option(
        "--verdict", help="what the audit found (without it: print the run's notes)")] = None,
    summary: Annotated[str, typer.Option("--summary", metavar="TEXT", help="one or two sentences")] = "",
    quote: Annotated[list[str] | None, typer.Option(
        "--quote", metavar="FILE:LINES[:LABEL][=TEXT]",
        help="lines N or N-M of a file of the run folder (workspace/solution.py, transcript.jsonl); with =TEXT "
             "they must contain TEXT; repeatable")] = None,
    db: ReadDbOpt = Path("rooftop.db"),
    json_output: JsonOpt = False,
) -> None:
    """Add an audit note to an agent run, its quotes checked against the run's files; or, without
    --verdict, print the run's notes."""
    from rooftop.report import annotations as audit

    store = _open(db)
    try:
        record, folder = audit.find_run(store, run)
        if verdict is None:
            if quote or summary:
                raise UserError("--quote and --summary describe a new note: give --verdict too")
            notes = audit.annotations(store, record.id)
            if json_output:
                sys.stdout.write(json.dumps([n.model_dump(mode="json") for n in notes], indent=2) + "\n")
            elif not notes:
                out.print(f"run {record.id}: no notes (add one with --verdict)", highlight=False)
            else:
                out.print(_notes_table(record.id, notes))
            return
        note = audit.Annotation(run_id=record.id, verdict=verdict.value, summary=summary,
                                quotes=[audit.quote(folder, spec) for spec in quote or []])
        note.id = audit.save(store, note)
    finally:
        store.close()
    if json_output:
        sys.stdout.write(note.model_dump_json(indent=2) + "\n")
        return
    out.print(f"run {record.id}: note {note.id} ({note.verdict}, {len(note.quotes)} quotes) recorded in {db}",
              highlight=False)


def _open(db: Path) -> Store:
    from rooftop.store.db import Store

    return Store(db, must_exist=True)


def _notes_table(run_id: str, notes: list[Annotation]) -> Table:
    table = Table(title=f"notes on run {run_id}", header_style="bold", title_justify="left")
    for col in ("id", "time (UTC)", "verdict", "summary", "quotes"):
        table.add_column(col)
    for note in notes:
        quotes = "\n".join(f"{q.file}:{q.start}-{q.end}" + (f" ({q.label})" if q.label else "") for q in note.quotes)
        table.add_row(str(note.id), note.created_at[:19].replace("T", " "), note.verdict, note.summary or "-",
                      quotes or "-")
    return table
