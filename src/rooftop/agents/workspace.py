"""A run's workspace: what an agent starts from, and what of it is its solution.

    PROMPT.md      the task, the visible shapes, how to use ./check and ./bench, the budget
    reference.py   the reference model
    shapes.yaml    the shapes the agent may see (visible ones; smoke ones on a CPU run)
    solution.py    the starter: the problem's own, else the reference with Model renamed ModelNew
    check, bench   the two commands, clients of the run's gateway

Held-out shapes never enter it: not in the prompt, not in shapes.yaml. The solution is
`solution.py` plus any sources under `kernels/`; the agent's other files (notes, scripts, tests)
are its own and are not graded.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import stat
from pathlib import Path

import yaml

from rooftop.agents.toolscript import tool_script
from rooftop.env.prompt import task_body
from rooftop.errors import UserError
from rooftop.problem.spec import Problem
from rooftop.service.jobs import MAX_SOURCE_BYTES, SourceSnapshot
from rooftop.solution.loader import SOURCE_SUFFIXES, hash_sources

ENTRY = "solution.py"
KERNELS = "kernels"
TOOLS = ("check", "bench")


def starter(problem: Problem) -> str:
    """The problem's `starter/solution.py` where it has one (kernel-to-kernel tasks start from a
    kernel), else its reference with `Model` renamed `ModelNew`: correct from the first ./check."""
    if problem.starter is not None:
        return problem.starter.read_text()
    return re.sub(r"\bModel\b", "ModelNew", problem.reference.read_text())


def workspace_prompt(problem: Problem, run_shapes: str, budget_s: float | None, max_turns: int | None) -> str:
    budget = []
    if budget_s:
        budget.append(f"You have {_duration(budget_s)} of wall-clock time; at the end the session is stopped, "
                      "and what is in `solution.py` then is what gets graded.")
    if max_turns:
        budget.append(f"You have at most {max_turns} turns.")
    which = "the smoke shapes (this run evaluates on a CPU)" if run_shapes == "smoke" else "the visible shapes"
    return "\n".join([
        task_body(problem, run_shapes).rstrip(), "",
        "## Your workspace", "",
        "- `solution.py`: your solution, a Python file defining `ModelNew`. " + _start(problem) + " "
        f"CUDA or C++ sources it loads go under `{KERNELS}/` (load them relative to `__file__`); "
        "everything under it is part of your solution, other files here are yours and are not graded.",
        "- `reference.py`: the reference model. `shapes.yaml`: the shapes you are shown.",
        f"- `./check`: correctness of `solution.py` on {which}, through rooftop's evaluator (the same "
        "checks as the final grading). Exit status 0 when correct.",
        f"- `./bench`: correctness, then time, speedup over the reference and fraction of the hardware roof "
        f"on {which}. The GPU is shared and queued: it is reached only through these two commands.",
        "- After you stop, `solution.py` is graded on these shapes and on shapes you have not seen, so make it "
        "correct and fast for any shape, not only the listed ones.",
        *([""] + budget if budget else []), ""])


def _start(problem: Problem) -> str:
    if problem.starter is None:
        return ("It starts as a copy of the reference (which may use operations this problem forbids: "
                "`./check` says so).")
    language = {"triton": "Triton", "cuda": "CUDA C++"}.get(problem.spec.policy.language or "", "its language")
    return (f"It starts as the starter kernel, which is correct but slow: make it faster, staying in {language}; "
            "the speedup is measured against the starter.")


def build_workspace(problem: Problem, root: Path, *, socket_path: Path, run_shapes: str,
                    budget_s: float | None, max_turns: int | None, python: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=False)
    (root / "PROMPT.md").write_text(workspace_prompt(problem, run_shapes, budget_s, max_turns))
    shutil.copyfile(problem.reference, root / "reference.py")
    shown = [{"name": s.name, "params": dict(s.params), **({"note": s.note} if s.note else {})}
             for s in problem.spec.select(run_shapes)]
    (root / "shapes.yaml").write_text(yaml.safe_dump({"problem": problem.name, "dtype": problem.spec.dtype,
                                                      "shapes": shown}, sort_keys=False))
    (root / ENTRY).write_text(starter(problem))
    for tool in TOOLS:
        path = root / tool
        path.write_text(tool_script(tool, socket_path, python))
        path.chmod(0o755)
    return root


NO_SOLUTION = "no solution.py (a regular file) in the workspace"


def solution_files(root: Path) -> dict[str, bytes]:
    """The solution as it stands in a workspace, read from outside the sandbox: regular files
    only, never through a link (an agent could point one at the results or a held-out file), at
    most MAX_SOURCE_BYTES. Empty when there is no solution.py."""
    found: dict[str, bytes] = {}
    entry = root / ENTRY
    if not _regular(entry):
        return found
    found[ENTRY] = _read(entry)
    kernels = root / KERNELS
    if _is_dir(kernels):
        for folder, dirs, names in os.walk(kernels, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and _is_dir(Path(folder) / d))
            for name in sorted(names):
                path = Path(folder) / name
                if path.suffix in SOURCE_SUFFIXES and _regular(path):
                    found[path.relative_to(root).as_posix()] = _read(path)
    check_files(found)
    return found


def check_files(files: dict[str, bytes]) -> None:
    """A solution's file names and sizes, as sent by ./check or read after a run."""
    if ENTRY not in files:
        raise UserError("files: solution.py is missing")
    for name in files:
        parts = name.split("/")
        if name != ENTRY and (parts[0] != KERNELS or len(parts) < 2 or any(p in ("", ".", "..") for p in parts)
                              or Path(name).suffix not in SOURCE_SUFFIXES):
            raise UserError(f"files: '{name}' is not solution.py or a source file under {KERNELS}/")
    size = sum(len(v) for v in files.values())
    if size > MAX_SOURCE_BYTES:
        raise UserError(f"files: the solution holds {size} bytes; at most {MAX_SOURCE_BYTES} are accepted")


def snapshot(files: dict[str, bytes]) -> SourceSnapshot:
    check_files(files)
    ordered = sorted(files.items(), key=lambda item: Path(item[0]).parts)  # load_solution's order
    return SourceSnapshot(source_hash=hash_sources(ordered), kind="folder" if len(files) > 1 else "file",
                          entry=ENTRY, files={k: base64.b64encode(v).decode() for k, v in ordered})


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read(MAX_SOURCE_BYTES + 1)


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:g} minutes" if minutes >= 1 else f"{seconds:g} seconds"
