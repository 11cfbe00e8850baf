"""A run folder (or a bare transcript) as one self-contained HTML page, and an index of runs.

Nothing is cut: a long text shows its first lines and folds the rest behind an expander; an
event the parser did not understand is shown raw; a line it could not read is listed with its
number. Subagents' events are nested, folded, under the call that started them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader
from markupsafe import Markup

from rooftop.agents.record import AgentRun
from rooftop.errors import UserError
from rooftop.transcripts.detect import load
from rooftop.transcripts.events import Event, Session
from rooftop.verdict import Verdict
from rooftop.viewer.highlight import code, stylesheet

FOLD_LINES = 40  # lines shown before the expander


@dataclass
class Folded:
    """A text shown whole: its head, and the rest behind an expander."""

    head: str
    rest: str = ""
    more: int = 0

    @classmethod
    def of(cls, text: str | None, lines: int = FOLD_LINES) -> Folded | None:
        if not text:
            return None
        split = text.splitlines(keepends=True)
        if len(split) <= lines:
            return cls(text)
        return cls("".join(split[:lines]), "".join(split[lines:]), len(split) - lines)


@dataclass
class Item:
    """One event on the timeline, ready for the template."""

    event: Event
    text: Folded | None = None
    reasoning: Folded | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    result: Folded | None = None
    raw: Markup | None = None
    children: list[Item] = field(default_factory=list)  # a subagent's events, under its call


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("rooftop.viewer", "templates"), autoescape=True,  # agents write any text
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["problem"] = problem_label
    env.filters["pretty"] = lambda value: json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return env


def _items(session: Session) -> list[Item]:
    top: list[Item] = []
    by_call: dict[str, Item] = {}  # the item holding each subagent call
    for event in session.events:
        item = Item(event=event, text=Folded.of(event.text), reasoning=Folded.of(event.reasoning),
                    result=Folded.of(event.tool_result.content) if event.tool_result else None)
        for call in event.tool_calls:
            arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(
                call.arguments, indent=1, ensure_ascii=False, default=str)
            item.calls.append({"call": call, "arguments": Folded.of(arguments),
                               "diff": code(call.diff, language="diff") if call.diff else None})
            if call.subagent and call.id:
                by_call[call.id] = item
        if event.role == "raw":
            item.raw = code(json.dumps(event.raw, indent=1, ensure_ascii=False, default=str), language="json")
        parent = by_call.get(event.parent) if event.parent else None
        (parent.children if parent is not None else top).append(item)
    return top


def _solution(folder: Path) -> list[tuple[str, Markup]]:
    workspace = folder / "workspace"
    files = [workspace / "solution.py", *sorted((workspace / "kernels").rglob("*"))] if workspace.is_dir() else []
    return [(str(f.relative_to(workspace)), code(f.read_text(errors="replace"), f.name)) for f in files
            if f.is_file() and not f.is_symlink()]


def _verdicts(folder: Path) -> list[dict[str, Any]]:
    out = []
    for name in ("visible", "graded"):
        path = folder / "verdicts" / f"{name}.json"
        if path.is_file():
            verdict = Verdict.model_validate_json(path.read_text())
            rows = [{"shape": s, "median_us": s.candidate.median * 1e6 if s.candidate and s.candidate.samples else None}
                    for s in verdict.shapes]
            out.append({"name": name, "verdict": verdict, "rows": rows})
    return out


def _calls(folder: Path) -> list[dict[str, Any]]:
    path = folder / "calls.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_page(target: Path) -> str:
    """The page of a run folder (run.json, transcript, workspace, verdicts) or of a transcript file."""
    if not target.exists():
        raise UserError(f"{target}: no such run folder or transcript")
    folder = target if target.is_dir() else None
    record = None
    if folder is not None and (folder / "run.json").is_file():
        record = AgentRun.model_validate_json((folder / "run.json").read_text())
    session = load(target)
    incomplete = (record is not None and not record.completed) or session.completed is False
    tool_calls = sum(len(e.tool_calls) for e in session.events)
    turns = sum(1 for e in session.events if e.role == "assistant" and e.usage is not None) or sum(
        1 for e in session.events if e.role == "assistant")
    return _environment().get_template("run.html.j2").render(
        css=stylesheet(), session=session, record=record, items=_items(session), incomplete=incomplete,
        turns=turns, tool_calls=tool_calls, solution=_solution(folder) if folder else [],
        verdicts=_verdicts(folder) if folder else [], calls=_calls(folder) if folder else [],
        run_json=code(record.model_dump_json(indent=1), language="json") if record else None,
        title=(f"{record.agent} · {record.model or 'default'} · {problem_label(record.problem)} · {record.repeat}"
               if record else target.name))


def problem_label(problem: str) -> str:
    """A deck problem's name as it is; a problem given by its path, by its folder's name."""
    return Path(problem).name if problem.startswith("/") else problem


def write_run_page(target: Path, out: Path | None = None) -> Path:
    out = out or ((target / "view.html") if target.is_dir() else target.with_suffix(".html"))
    out.write_text(run_page(target))
    return out


def write_index(runs: Path, out: Path | None = None) -> Path:
    """`index.html` in the runs folder, linking each run's page (written beside its files)."""
    if not runs.is_dir():
        raise UserError(f"--index {runs}: not a folder of run folders")
    rows = []
    for folder in sorted(p for p in runs.iterdir() if (p / "run.json").is_file()):
        record = AgentRun.model_validate_json((folder / "run.json").read_text())
        page = write_run_page(folder)
        rows.append({"record": record, "href": page.relative_to(runs).as_posix()})
    if not rows:
        raise UserError(f"--index {runs}: no run folders (with run.json) in it")
    out = out or runs / "index.html"
    out.write_text(_environment().get_template("index.html.j2").render(css=stylesheet(), rows=rows,
                                                                        title=f"runs in {runs.name}"))
    return out
