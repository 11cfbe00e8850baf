"""Turn a path into a validated `Problem`: the deck format that opens it loads it (problem/formats/):
a rooftop problem folder, its problem.yaml, or a KernelBench-style single file."""

from __future__ import annotations

from pathlib import Path

from rooftop.errors import SpecError
from rooftop.problem.formats import opener
from rooftop.problem.spec import Problem


def load_problem(path: str | Path, bundled_name: str | None = None) -> Problem:
    path = Path(path)
    found = opener(path)
    if found is None:
        raise SpecError(path, "", "not a problem folder (with problem.yaml) or a KernelBench-style .py file")
    return found.load(path, bundled_name)
