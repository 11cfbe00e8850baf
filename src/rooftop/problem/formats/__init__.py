"""Deck formats: the kinds of problem source rooftop reads, one module of this package each.

A format registers one `DeckFormat` in `FORMATS`; adding a format is one new module. A format
recognises its sources (a folder or a file), opens those it reads as one problem in place (a
rooftop problem folder, a KernelBench file), and imports the others as rooftop problem folders of
its deck, with the shared import report (problem/imports.py). Modules starting with `_` are a
format's helpers, not formats.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

from rooftop.errors import SpecError, UserError
from rooftop.plugins import Registry
from rooftop.problem.imports import ImportReport
from rooftop.problem.spec import Problem

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")
Progress = Callable[[str, int, int], None]  # (problem name, index, total), told before each problem


class DeckFormat:
    """One kind of problem source. The defaults are a format that neither opens nor imports."""

    name: str = ""
    rank: int = 100  # detection order: the most specific format first
    deck: str | None = None  # the deck its imports are written as; None: it is not imported

    def recognise(self, path: Path) -> bool:
        """Whether `path` is a source of this format."""
        return False

    def opens(self, path: Path) -> bool:
        """Whether `path` is one problem this format loads as it stands (no import first)."""
        return False

    def load(self, path: Path, bundled_name: str | None = None) -> Problem:
        """The problem at `path`, which this format `opens`."""
        raise SpecError(path, "", f"a {self.name} source is imported, not loaded")

    def import_deck(self, path: Path, into: Path, progress: Progress | None = None) -> ImportReport:
        """Write every problem of `path` as a rooftop problem folder of this format's deck under `into`."""
        raise UserError(f"{path}: {self.name} problems are not imported")


FORMATS: Registry[DeckFormat] = Registry("deck format", __name__)


def ordered() -> list[DeckFormat]:
    return sorted(FORMATS.values(), key=lambda found: (found.rank, found.name))


def detect(path: Path) -> DeckFormat | None:
    """The format of a source: the most specific one that recognises it."""
    return next((found for found in ordered() if found.recognise(Path(path))), None)


def opener(path: Path) -> DeckFormat | None:
    """The format that loads `path` as one problem, if one does."""
    return next((found for found in ordered() if found.opens(Path(path))), None)


def check_reference(path: Path) -> ast.Module:
    """A reference file parses and defines Model, get_init_inputs and get_inputs at module level."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        raise SpecError(path, f"line {exc.lineno}", f"Python syntax error: {exc.msg}") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for name in ("Model", *REQUIRED_FUNCTIONS):
        if name not in defined:
            raise SpecError(path, name, "must be defined at module level "
                            "(class Model(nn.Module), get_init_inputs(), get_inputs())")
    return tree
