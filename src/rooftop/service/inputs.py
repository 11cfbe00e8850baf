"""What `rooftop batch` reads: a folder of solutions to one problem, or a JSONL file of
(problem, solution) pairs. Every line and path is checked before anything is queued, so a
mistake is reported with its file, line and field, and nothing half-submitted is left behind.

A JSONL line is an object with `problem` (a deck name or a path) and either `solution` (a path
to a .py file or a solution folder; relative paths are read from the JSONL file's folder) or
`code` (the solution's source as text, with an optional `name` for it).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from rooftop.errors import UserError
from rooftop.problem.registry import resolve
from rooftop.problem.spec import Problem
from rooftop.service.jobs import SourceSnapshot
from rooftop.solution.loader import load_solution, solution_entries


class Submission(BaseModel):
    """One candidate to queue: the problem, the solution's files, and the name it is shown by."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    problem: Problem
    source: SourceSnapshot
    label: str


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: str
    solution: str | None = None
    code: str | None = None
    name: str | None = None


def read_input(path: Path, problem: str | None = None) -> list[Submission]:
    if path.is_dir():
        return _folder(path, problem)
    if path.is_file():
        if problem is not None:
            raise UserError(f"--problem: a JSONL input names each line's problem; --problem goes with a folder "
                            f"of solutions (got the file {path})")
        return _jsonl(path)
    raise UserError(f"{path}: no such folder of solutions or JSONL file")


def _folder(folder: Path, problem_name: str | None) -> list[Submission]:
    if problem_name is None:
        raise UserError(f"--problem: a folder of solutions ({folder}) needs the problem they solve "
                        "(or give a JSONL file of problem/solution pairs)")
    problem = resolve(problem_name)
    entries = solution_entries(folder)
    if not entries:
        raise UserError(f"{folder}: no solutions here (.py files, or folders with a solution.py)")
    return [Submission(problem=problem, source=SourceSnapshot.of(load_solution(e)), label=str(e)) for e in entries]


def _jsonl(path: Path) -> list[Submission]:
    out: list[Submission] = []
    problems: dict[str, Problem] = {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot be read as a JSONL file ({exc})") from None
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        try:
            line = _Line.model_validate(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not a JSON object ({exc.msg})") from None
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(p) for p in error["loc"]) or "line"
            raise UserError(f"{where}: {field}: {error['msg'].lower()} (a line is {{\"problem\": ..., "
                            "\"solution\": PATH}} or {\"problem\": ..., \"code\": SOURCE})") from None
        if (line.solution is None) == (line.code is None):
            raise UserError(f"{where}: give exactly one of 'solution' (a path) and 'code' (the source)")
        if line.problem not in problems:
            try:
                problems[line.problem] = resolve(line.problem)
            except UserError as exc:
                raise UserError(f"{where}: problem: {exc}") from None
        if line.code is not None:
            name = line.name or "solution.py"
            if "/" in name or not name.endswith(".py"):
                raise UserError(f"{where}: name: expected a file name ending in .py (got '{name}')")
            source, label = SourceSnapshot.from_code(line.code, name), f"{path.name}:{number}"
        else:
            assert line.solution is not None
            target = Path(line.solution)
            target = target if target.is_absolute() else path.parent / target
            try:
                source, label = SourceSnapshot.of(load_solution(target)), line.solution
            except UserError as exc:
                raise UserError(f"{where}: solution: {exc}") from None
        out.append(Submission(problem=problems[line.problem], source=source, label=label))
    if not out:
        raise UserError(f"{path}: no lines to evaluate")
    return out
