"""`rooftop prompt`: one self-contained prompt for a problem, for a pipeline that asks its own
model for a solution file (held-out shapes never appear in it)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from rooftop.cli.common import JsonOpt, out
from rooftop.errors import UserError


class PromptShapes(str, Enum):
    visible = "visible"
    smoke = "smoke"


def register(app: typer.Typer) -> None:
    app.command("prompt")(prompt_command)


def prompt_command(
    problem: Annotated[str, typer.Argument(
        metavar="PROBLEM", help="problem folder, KernelBench-style .py file, or '<deck>/<name>'")],
    shapes: Annotated[PromptShapes, typer.Option(
        "--shapes", help="the shapes the prompt shows (smoke: the small ones for a CPU)")] = PromptShapes.visible,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", metavar="FILE", help="write the prompt to this file instead of stdout")] = None,
    json_output: JsonOpt = False,
) -> None:
    """Print one prompt that asks for a solution file: the task, the reference, the contract, the
    visible (or smoke) shapes, the rules, the accepted kernels, the answer format and an example."""
    from rooftop.problem.registry import resolve

    found = resolve(problem)
    from rooftop.env.prompt import one_shot_prompt

    if not found.spec.select(shapes.value):
        raise UserError(f"--shapes {shapes.value}: problem '{found.name}' has no {shapes.value} shapes")
    made = one_shot_prompt(found, shapes.value)
    if output is not None:
        try:
            output.write_text(made.prompt)
        except OSError as exc:
            raise UserError(f"-o {output}: cannot write it ({exc.strerror or exc})") from None
    if json_output:
        sys.stdout.write(made.model_dump_json(indent=2) + "\n")
    elif output is None:
        sys.stdout.write(made.prompt)
    else:
        out.print(f"[dim]prompt for {made.problem} ({len(made.shapes)} {shapes.value} shapes) written to "
                  f"{output}[/dim]", highlight=False)
