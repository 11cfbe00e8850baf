"""Bundled decks: `problems/<deck>/<problem>/`, addressed as '<deck>/<problem>'."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from rooftop.errors import UserError
from rooftop.problem.loader import load_problem
from rooftop.problem.spec import Problem


def problems_root() -> Path:
    """The folder holding the decks: $ROOFTOP_PROBLEMS, else the repository's `problems/`."""
    env = os.environ.get("ROOFTOP_PROBLEMS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "problems"


def bundled_names(deck: str | None = None) -> list[str]:
    root = problems_root()
    if not root.is_dir():
        return []
    decks = [root / deck] if deck else sorted(p for p in root.iterdir() if p.is_dir())
    return [f"{d.name}/{p.name}" for d in decks if d.is_dir()
            for p in sorted(d.iterdir()) if (p / "problem.yaml").is_file()]


def resolve(name_or_path: str) -> Problem:
    """A path that exists wins; otherwise a bundled '<deck>/<problem>' name."""
    path = Path(name_or_path)
    if path.exists():
        # a bundled problem reached by its path keeps its bundled name (and so its stored baselines)
        folder = (path if path.is_dir() else path.parent).resolve()
        root = problems_root().resolve()
        inside = folder.parent.parent == root and (folder / "problem.yaml").is_file()
        return load_problem(path, bundled_name=f"{folder.parent.name}/{folder.name}" if inside else None)
    candidate = problems_root() / name_or_path
    if name_or_path.count("/") == 1 and (candidate / "problem.yaml").is_file():
        return load_problem(candidate, bundled_name=name_or_path)
    known = bundled_names()
    hint = f"; bundled problems: {', '.join(known)}" if known else ""
    raise UserError(f"problem '{name_or_path}': no such file or folder, and not a bundled name{hint}")


def expected_statuses(problem: Problem) -> dict[str, dict[str, str]]:
    """What each bundled solution must get: solutions/expected.yaml, {entry: {cpu: STATUS, cuda: STATUS}}."""
    path = problem.root / "solutions" / "expected.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of solution name -> {{cpu: STATUS, cuda: STATUS}}")
    return data
