"""The static gate: the solution's files read, never run, on the trusted side."""

from __future__ import annotations

from pathlib import Path

from rooftop.integrity.native_policy import check_native
from rooftop.integrity.policy import Violation, check_file_names, check_language, check_source
from rooftop.problem.spec import Policy
from rooftop.solution.loader import Solution
from rooftop.verdict import GateFailed, Status


def check_solution_files(solution: Solution, policy: Policy) -> None:
    """Raise `GateFailed` for a syntax error (compile_error) or any policy violation (rejected)."""
    root = solution.path if solution.path.is_dir() else solution.path.parent
    violations: list[tuple[Path, Violation]] = check_file_names(solution.files, root)
    texts = {path: path.read_text(errors="replace") for path in solution.files}
    for path, text in texts.items():
        if path.suffix != ".py":
            violations += [(path, Violation(rule, line, message)) for rule, line, message in check_native(text, policy)]
            continue
        try:
            violations += [(path, v) for v in check_source(text, policy, str(path))]
        except SyntaxError as exc:
            raise GateFailed(Status.compile_error, f"{path.name}:{exc.lineno}: syntax error: {exc.msg}")
    violations += check_language(texts, policy)
    if violations:
        raise GateFailed(Status.rejected, *[f"{path.name} {v}" for path, v in violations[:10]])
