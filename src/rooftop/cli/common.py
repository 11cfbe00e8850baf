"""What every `rooftop` verb shares: consoles, option types, the progress bar."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

# a pipe or a file gets wide tables; a terminal gets its own width
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)

DeviceOpt = Annotated[str, typer.Option("--device", help="auto | cpu | cuda")]
ShapesOpt = Annotated[str, typer.Option("--shapes", help="auto | visible | held_out | all | smoke "
                                        "(auto: all on a GPU, smoke shapes on a CPU)")]
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite results database (appended to)")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=0.1,
                      help="wall-clock seconds per gate (per shape for correctness and timing)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print only the JSON document on stdout")]
SandboxOpt = Annotated[str, typer.Option("--sandbox", help="auto | bwrap | none (auto: bwrap when installed)")]
GraphsOpt = Annotated[bool, typer.Option("--graphs", help="time candidate and reference as CUDA-graph replays "
                                         "(for launch-bound shapes)")]


def progress_bar(enabled: bool) -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=err, transient=True, disable=not enabled)
