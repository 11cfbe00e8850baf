"""One error hierarchy.

A `UserError` is a mistake in what the user handed us (a path, a spec, an argument): the CLI
prints its one-line message and exits with status 2, no traceback. Anything else that escapes is
our bug and becomes an `internal_error` verdict or a traceback.
"""

from __future__ import annotations


class RooftopError(Exception):
    """Base of every error rooftop raises on purpose."""


class UserError(RooftopError):
    """Bad input: the message names the file, field or argument and what was expected."""

    exit_code = 2


class SpecError(UserError):
    """A problem specification that does not validate."""

    def __init__(self, path: object, field: str, expected: str) -> None:
        self.path, self.field, self.expected = str(path), field, expected
        where = f"{self.path}: {field}: " if field else f"{self.path}: "
        super().__init__(where + expected)


class SolutionError(UserError):
    """A solution path that does not exist or has nothing to evaluate."""


def on_one_line(text: str, limit: int = 300) -> str:
    """`text` with its whitespace runs made single spaces, cut to `limit` characters with "..."."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: Python's MemoryError, torch's OutOfMemoryError (host or device), or
    an allocator's message saying so (read without importing torch)."""
    text = str(exc)
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" \
        or "can't allocate memory" in text or "out of memory" in text.lower()
