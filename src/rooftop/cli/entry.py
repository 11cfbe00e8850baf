"""The `rooftop` command's entry point: the bytecode cache first, then the CLI.

Where the environment keeps no bytecode (`rooftop.bytecode`), every module a command imports is
compiled again in each process: torch, and the CLI's own typer, rich, pydantic and rooftop too.
So the cache is switched on before any of them is imported, and the CLI is imported after.
"""

from __future__ import annotations


def main() -> None:
    from rooftop.build.cache import cache_root
    from rooftop.bytecode import enable

    enable(cache_root())
    from rooftop.cli.main import main as run

    run()
