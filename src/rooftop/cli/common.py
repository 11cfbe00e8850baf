"""What every `rooftop` verb shares: consoles, option types, the progress bar, the app settings."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from rooftop.errors import UserError
from rooftop.vocabulary import SHAPE_GROUPS

# the choices come from the engine's own enums (a device or sandbox is spelled once), in modules
# that do not import torch
from rooftop.vocabulary import DeviceChoice as Device
from rooftop.vocabulary import SandboxKind as Sandbox

if TYPE_CHECKING:
    from rooftop.vocabulary import Settings

# Plain (click-style) help: typer's rich panels print a type column (`<bool>` beside every flag,
# `<str>` beside free text) that says nothing a reader needs; plain help shows flags bare and
# choices as `<a|b|c>`.
APP_SETTINGS: dict[str, Any] = {
    "rich_markup_mode": None,
    "context_settings": {"help_option_names": ["-h", "--help"]},
    "pretty_exceptions_enable": False,
    "add_completion": False,
}


def cli_app(help: str, **settings: Any) -> typer.Typer:
    """A Typer app (the root or a sub-command group) with rooftop's help style and `-h`."""
    return typer.Typer(help=help, **{**APP_SETTINGS, **settings})


def _stdout_width() -> int | None:
    """None lets rich choose: a terminal's width, else COLUMNS. A pipe or file with no COLUMNS
    gets wide tables instead of rich's 80 columns, so saved output keeps one row per line."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return None
    return 200


out = Console(width=_stdout_width())
err = Console(stderr=True)

DeviceOpt = Annotated[Device, typer.Option("--device", help="where to run (auto: cuda when torch sees a GPU)")]
ShapesOpt = Annotated[str, typer.Option(
    "--shapes", metavar="GROUP|NAME[,NAME]",
    help=f"a shape group ({' | '.join(SHAPE_GROUPS)}) or comma-separated shape names "
         "(auto: all on a GPU, smoke shapes on a CPU)")]
DbOpt = Annotated[Path, typer.Option("--db", metavar="FILE", help="SQLite results database (appended to)")]
TimeoutOpt = Annotated[float | None, typer.Option(
    "--timeout", min=0.1, metavar="SECONDS",
    help="wall-clock seconds per gate (per shape for correctness and timing); default: chosen per gate from "
         "the device and the time the problem's reference takes")]
SeedOpt = Annotated[int | None, typer.Option("--seed", metavar="N", help="base seed for reproducible inputs")]
TimingOpt = Annotated[bool, typer.Option("--timing/--no-timing", help="time correct solutions")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print only the JSON document on stdout")]
SandboxOpt = Annotated[Sandbox, typer.Option("--sandbox", help="how the candidate is isolated "
                                             "(auto: bwrap when installed)")]
GraphsOpt = Annotated[bool, typer.Option("--graphs", help="time candidate and reference as CUDA-graph replays "
                                         "(for launch-bound shapes)")]


def progress_bar(enabled: bool) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), console=err, transient=True,
                    disable=not enabled)


def settings_from_options(device: Device, shapes: str, timeout: float | None, seed: int | None, timing: bool,
                          sandbox: Sandbox, graphs: bool = False) -> Settings:
    """An evaluation's settings from the options the evaluating commands share (eval, demo, batch,
    selfcheck, batch-kb), checked first: by the settings themselves, then against the machine,
    each error naming its option."""
    from pydantic import ValidationError

    from rooftop.pipeline.evaluate import check_settings
    from rooftop.vocabulary import Settings

    try:
        settings = Settings(device=device, shapes=shapes, timeout=timeout, seed=seed, timing=timing,
                            build_timeout=max(timeout or 0.0, 900.0), sandbox=sandbox, graphs=graphs)
    except ValidationError as exc:
        raise UserError(option_error(exc)) from None
    check_settings(settings, OPTIONS)  # no GPU, no bwrap: a one-line error before any evaluation starts
    return settings


OPTIONS = {"device": "--device", "shapes": "--shapes", "timeout": "--timeout", "seed": "--seed",
           "sandbox": "--sandbox", "graphs": "--graphs", "build_timeout": "--timeout"}


def option_error(exc: Any) -> str:
    """A settings ValidationError as the CLI's user sees it: the option, then what was wrong."""
    error = exc.errors()[0]
    message = str(error["msg"]).removeprefix("Value error, ")
    field = str(error["loc"][0]) if error["loc"] else ""
    if not field and message.split(": ", 1)[0] in OPTIONS:  # a rule over several fields names the one it is about
        field, message = message.split(": ", 1)
    return f"{OPTIONS.get(field, '--' + field.replace('_', '-'))}: {message}"
