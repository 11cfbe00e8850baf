"""What an importer of another benchmark's problems reports, whichever format it reads (KernelBench
files, KernelBench-Hard folders): one report model, so the commands and their --json read alike."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel


class Note(BaseModel):
    """Something of their problem that rooftop's differs in, and why."""

    field: str
    note: str


class Skipped(BaseModel):
    """Something read that is not a problem, and why."""

    origin: str
    reason: str


class Imported(BaseModel):
    """One problem written (or found unchanged) under the deck root."""

    name: str
    folder: Path
    change: Literal["added", "updated", "unchanged"]
    version: int = 1
    dtype: str = "float32"
    regime: str = "compute"
    shapes: int = 1
    flops: str | None = None  # a formula, or a count made at import
    bytes: str | None = None
    notes: list[Note] = []

    def note(self, field: str) -> str:
        """What was said of one field ('' when nothing was)."""
        return next((n.note for n in self.notes if n.field == field), "")


class ImportReport(BaseModel):
    root: Path
    imported: list[Imported] = []
    skipped: list[Skipped] = []
    notes: list[str] = []  # true of every problem of the format: said once
