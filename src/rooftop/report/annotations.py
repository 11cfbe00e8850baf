"""Audit notes on agent runs: a verdict about how the run got its score, backed by quotes.

A quote names lines of a file in the run folder (the solution, the transcript) and carries their
text, copied when the note is made: the note still says what it points at after the folder is
moved or deleted, and a quote that does not match its file is refused rather than stored.

The table is created here, on first write, until the store's schema takes it over. (No `from __future__
import annotations` here: it would clash with the function of that name.)
"""

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field

from rooftop.agents.record import AgentRun
from rooftop.errors import UserError
from rooftop.store.db import Store

AuditVerdict = Literal["clean", "rubric_leak", "reward_hack", "interesting", "bug"]
VERDICTS: tuple[str, ...] = get_args(AuditVerdict)

# the mark a leaderboard cell carries for each kind of note on one of its runs
MARKS: dict[str, str] = {"reward_hack": "‡", "rubric_leak": "†", "bug": "§", "interesting": "*", "clean": "°"}

MAX_QUOTE_CHARS = 20_000  # a transcript line can be megabytes: the note keeps this much of it

class Quote(BaseModel):
    file: str  # relative to the run folder
    start: int  # first line, 1-based
    end: int  # last line, inclusive
    label: str = ""
    text: str  # the lines as the file held them when the note was made


class Annotation(BaseModel):
    id: int | None = None  # the row's id once stored
    run_id: str
    verdict: AuditVerdict
    summary: str = ""
    quotes: list[Quote] = []
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))


def save(store: Store, annotation: Annotation) -> int:
    """Append one note; its id."""
    return store.agent_runs.save_annotation(annotation.run_id, annotation.created_at, annotation.verdict,
                                            annotation.model_dump_json(exclude={"id"}))


def annotations(store: Store, run_id: str | None = None) -> list[Annotation]:
    """Every note (or one run's), oldest first."""
    return [Annotation.model_validate({**json.loads(row.annotation_json), "id": row.id})
            for row in store.agent_runs.annotations(run_id)]


# -- finding the run and checking quotes ---------------------------------------------------------

def find_run(store: Store, ref: str) -> tuple[AgentRun, Path]:
    """The run RUN names (its id, or its folder) and the folder its files are in."""
    runs = {row.id: row.record_json for row in store.agent_runs.runs()}
    path = Path(ref)
    if ref in runs:
        run = AgentRun.model_validate_json(runs[ref])
        return run, Path(run.folder)
    if path.is_dir():
        ident = path.resolve().name
        record = path / "run.json"
        if record.is_file():
            try:
                ident = AgentRun.model_validate_json(record.read_text()).id
            except ValueError:
                raise UserError(f"RUN {ref}: run.json in this folder is not an agent run record") from None
        if ident not in runs:
            raise UserError(f"RUN {ref}: run {ident} is not in {store.path} (--db names the sweep's database)")
        return AgentRun.model_validate_json(runs[ident]), path
    raise UserError(f"RUN {ref}: neither an agent run id in {store.path} nor a run folder")


_QUOTE = re.compile(r"^(?P<file>[^:=]+):(?P<start>\d+)(?:-(?P<end>\d+))?(?::(?P<label>[^=]*))?(?:=(?P<text>.*))?$",
                    re.DOTALL)


def quote(folder: Path, spec: str) -> Quote:
    """A quote from `FILE:N[-M][:LABEL][=TEXT]`, its lines read from the run folder; refused when
    the file or the lines are not there, or when TEXT is given and those lines do not hold it
    (compared with runs of whitespace made one space, so a quote may be part of a line)."""
    match = _QUOTE.match(spec)
    if match is None:
        raise UserError(f"--quote {spec}: expected FILE:LINES[:LABEL][=TEXT], LINES as N or N-M")
    name, start = match["file"].strip(), int(match["start"])
    end = int(match["end"]) if match["end"] else start
    root = folder.resolve()
    target = (root / name).resolve()
    if Path(name).is_absolute() or not target.is_relative_to(root):
        raise UserError(f"--quote {spec}: {name} is not inside the run folder (give a path relative to it)")
    if not target.is_file():
        raise UserError(f"--quote {spec}: no file {name} in the run folder {folder}")
    lines = target.read_text(errors="replace").splitlines()
    if not 1 <= start <= end <= len(lines):
        raise UserError(f"--quote {spec}: lines {start}-{end} are outside {name}, which has {len(lines)} lines"
                        if start <= end else f"--quote {spec}: the range {start}-{end} is backwards")
    text = "\n".join(lines[start - 1:end])
    if match["text"] is not None and _squashed(match["text"]) not in _squashed(text):
        found = _squashed(text)
        raise UserError(f"--quote {spec}: {name}:{start}-{end} does not contain that text (it reads: "
                        f"{found[:120]!r}{'...' if len(found) > 120 else ''})")
    if len(text) > MAX_QUOTE_CHARS:
        text = text[:MAX_QUOTE_CHARS] + f"\n[... {len(text) - MAX_QUOTE_CHARS} more characters]"
    return Quote(file=Path(name).as_posix(), start=start, end=end, label=(match["label"] or "").strip(), text=text)


def _squashed(text: str) -> str:
    return " ".join(text.split())
