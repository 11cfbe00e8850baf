"""`rooftop results`: past evaluations read back from the results database.

Reading only: a database that does not exist is an error, never created. Nothing here imports
torch, so listing stays quick.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from rooftop.cli.common import JsonOpt, cli_app, out
from rooftop.errors import UserError

if TYPE_CHECKING:
    from rooftop.store.db import Store
    from rooftop.store.evaluations import EvaluationRow
    from rooftop.verdict import Status

ReadDbOpt = Annotated[Path, typer.Option("--db", metavar="PATH",
                                         help="SQLite results database to read (never created)")]

results_app = cli_app("List past evaluations from the results database, or show one.")


def register(app: typer.Typer) -> None:
    app.add_typer(results_app, name="results")


@results_app.callback(invoke_without_command=True)
def results_command(
    ctx: typer.Context,
    problem: Annotated[str | None, typer.Option(
        "--problem", metavar="NAME",
        help="stored problem name, or its trailing path components ('scale' finds '/x/scale')")] = None,
    status: Annotated[str | None, typer.Option(
        "--status", metavar="STATUS", help="only this verdict status (correct, incorrect, rejected, ...)")] = None,
    last: Annotated[int | None, typer.Option("--last", metavar="N", min=1, help="only the newest N")] = None,
    json_output: JsonOpt = False,
    db: ReadDbOpt = Path("rooftop.db"),
) -> None:
    """List past evaluations, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    wanted = _status(status)
    store = _open(db)
    rows = store.evaluations.rows(problem=_problem_key(problem), status=wanted, last=last)
    store.close()
    if json_output:
        sys.stdout.write(json.dumps([r.model_dump(mode="json") for r in rows], indent=2) + "\n")
        return
    if not rows:
        filters = [f"{k} {v}" for k, v in (("--problem", problem), ("--status", status)) if v]
        out.print(f"no evaluations in {db}" + (f" matching {', '.join(filters)}" if filters else ""),
                  highlight=False)
        return
    out.print(_table(rows, db))


@results_app.command("show")
def show_command(
    evaluation_id: Annotated[int, typer.Argument(metavar="ID", help="evaluation id, as `rooftop results` lists it")],
    json_output: JsonOpt = False,
    db: ReadDbOpt = Path("rooftop.db"),
) -> None:
    """Show one stored evaluation's full verdict, as `rooftop eval` printed it."""
    from rooftop.cli.render import print_verdict

    store = _open(db)
    verdict = store.evaluations.verdict(evaluation_id)
    store.close()
    if verdict is None:
        raise UserError(f"ID {evaluation_id}: no evaluation with this id in {db} (`rooftop results` lists them)")
    if json_output:
        sys.stdout.write(verdict.model_dump_json(indent=2) + "\n")
        return
    print_verdict(verdict, out)


def _open(db: Path) -> Store:
    from rooftop.store.db import Store

    return Store(db, must_exist=True)


def _status(value: str | None) -> Status | None:
    from rooftop.verdict import Status

    if value is None:
        return None
    valid = [s.value for s in Status]
    if value not in valid:
        raise UserError(f"--status: expected one of {', '.join(valid)} (got '{value}')")
    return Status(value)


def _problem_key(value: str | None) -> list[str]:
    """The names to look for: the value as typed, and for a path that exists the resolved path a
    problem loaded from it is stored under."""
    if not value:
        return []
    names = [value.rstrip("/") or value]
    if Path(value).exists():
        names.append(str(Path(value).resolve()))
    return names


def _table(rows: list[EvaluationRow], db: Path) -> Table:
    from rooftop.cli.render import number, status_text

    table = Table(title=f"evaluations in {db}, newest first", header_style="bold")
    for col in ("id", "time (UTC)", "problem", "solution", "status", "reward", "speedup", "roofline",
                "device", "wall"):
        table.add_column(col, justify="right" if col in ("id", "reward", "speedup", "roofline", "wall") else "left")
    for r in rows:
        table.add_row(str(r.id), r.created_at[:19].replace("T", " "), r.problem, Path(r.solution).name,
                      status_text(r.status), number(r.reward, "{:+.3f}"), number(r.geomean_speedup, "{:.3f}x"),
                      number(r.geomean_roofline, "{:.1%}"), r.device_name or r.device or "-",
                      number(r.wall_seconds, "{:.1f} s"))
    return table
