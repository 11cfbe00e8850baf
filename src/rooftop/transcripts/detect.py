"""Telling a transcript's format from its content, and loading a transcript or a run folder.

The first line is not enough (a Claude Code stream can open with hook events, a Codex text log with
a banner), so records are read in windows and each format's sniffer is asked, in priority order,
until one recognises a window. A file no sniffer recognises loads as format `unknown`, every record
kept raw.

A run folder holds the agent's stdout as `transcript.jsonl` and, under `agent_files/` (beside it in
older folders), the files the CLI kept for itself. Where one of those says more than the stdout, it
is loaded instead (`choose` says which and why): a Codex rollout has the model, timestamps,
reasoning and diffs that `codex exec --json` lacks; a Kimi `context.jsonl` has the user's prompts
that print mode does not echo, and its `wire.jsonl` the usage. Claude Code's stream stays the
choice over its session files: it has the result line (totals, cost) and the subagents inline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooftop.transcripts.build import Builder, mapping, string
from rooftop.transcripts.events import Session
from rooftop.transcripts.lines import Text, document, head, records
from rooftop.transcripts.parsers import kimi, parser, registry

UNKNOWN = "unknown"
PLAIN = "text"  # an agent's plain output (parsers/plain.py): chosen, never sniffed
WINDOW = 20  # records per sniffing window
SCAN_LIMIT = 2000  # records read at most to tell a format
TRANSCRIPT = "transcript.jsonl"
CALLS = "calls.jsonl"  # the gateway's record of the run's checks and benches, never a transcript
# where the runner copies the files a CLI kept for itself (agents/runner.py: regular files only, apart
# from the harness's own records); older run folders have them beside the transcript
AGENT_FILES = "agent_files"


def sniff(window: list[Any]) -> str | None:
    """The first format, in priority order, whose sniffer recognises these records (a sniffer that
    trips over an odd record counts as not recognising it)."""
    for candidate in registry().values():
        try:
            if candidate.sniff(window):
                return candidate.format
        except Exception:  # noqa: BLE001 - records of any shape reach every sniffer
            continue
    return None


def detect(path: str | Path) -> str:
    """The format of the transcript at `path`, or `unknown`. A file whose lines are not JSON may be
    one JSON document (pretty-printed), which is then asked about whole."""
    window: list[Any] = []
    for number, (_, value) in enumerate(records(path), 1):
        window.append(value)
        if len(window) == WINDOW:
            if (found := sniff(window)) is not None:
                return found
            window = []
        if number >= SCAN_LIMIT:
            break
    found = sniff(window) if window else None
    if found is None and (whole := document(path)) is not None:
        found = sniff([whole] if isinstance(whole, dict) else [])
    return found or UNKNOWN


def mostly_text(path: str | Path) -> bool:
    """Whether most of the first records of `path` are lines that are not JSON, and the file is not
    one JSON document either: plain output."""
    window = head(path, 200)
    return (bool(window) and 2 * sum(isinstance(v, Text) for _, v in window) > len(window)
            and document(path) is None)


def _unknown(path: str | Path) -> Session:
    b = Builder(UNKNOWN, str(path))
    for line, record in b.walk(records(path)):
        b.raw(line, record, str(record.get("type") or ""))
    return b.finish()


def parse_file(path: str | Path, format: str | None = None) -> Session:
    """The session of one file, in the given format or the one `detect` finds."""
    format = format or detect(path)
    if format == UNKNOWN and mostly_text(path):
        format = PLAIN
    if format == UNKNOWN:
        return _unknown(path)
    return parser(format).read(path)


@dataclass
class Choice:
    """What `load` reads for a run folder: the main file, files it draws on, and why."""

    path: Path
    format: str
    extra: list[Path] = field(default_factory=list)
    reason: str = ""


def _first(path: Path, kind: str) -> dict[str, Any]:
    return next((v for _, v in head(path, 50) if isinstance(v, dict) and v.get("type") == kind), {})


def _rollout(candidates: dict[Path, str], thread: str | None) -> Path | None:
    """The Codex rollout of the session `thread` (the exec stream's thread id), else the main one."""
    rollouts = [p for p, f in candidates.items() if f == "codex_rollout"]
    by_id = [p for p in rollouts if string(mapping(_first(p, "session_meta"), "payload").get("id")) == thread]
    main = [p for p in rollouts if not isinstance(mapping(_first(p, "session_meta"), "payload").get("source"), dict)]
    pool = by_id or main or rollouts
    return max(pool, key=lambda p: p.stat().st_size) if pool else None


def choose(folder: str | Path) -> Choice | None:
    """The richest transcript of a run folder (see the module's docstring); None if it has none."""
    folder = Path(folder)
    stdout = folder / TRANSCRIPT
    main = detect(stdout) if stdout.is_file() and stdout.stat().st_size else None
    kept = [*folder.glob("*.jsonl"), *(folder / AGENT_FILES).rglob("*.jsonl"), *folder.glob("*.json"),
            *(folder / AGENT_FILES).rglob("*.json")]
    records_of_run = (stdout, folder / CALLS, folder / "run.json")
    candidates = {p: detect(p) for p in sorted(kept) if p not in records_of_run and p.is_file()
                  and p.stat().st_size}
    if main in (None, UNKNOWN, "codex_exec") and any(f == "codex_rollout" for f in candidates.values()):
        thread = string(_first(stdout, "thread.started").get("thread_id")) if main else None
        rollout = _rollout(candidates, thread)
        if rollout is not None:
            return Choice(rollout, "codex_rollout", reason="the Codex rollout has the model, timestamps, reasoning "
                                                           "and diffs the exec stream lacks")
    if main in (None, UNKNOWN, "kimi"):
        wires = [p for p, f in candidates.items() if f == "kimi_wire"]
        contexts = [p for p, f in candidates.items() if f == "kimi" and p.name.startswith("context")
                    and "subagents" not in p.parts and not p.name.startswith("context_sub_")]
        context = next((p for p in contexts if p.name == "context.jsonl"), contexts[0] if contexts else None)
        if context is not None or (main == "kimi" and wires):
            chosen = context or stdout
            why = "Kimi's context.jsonl has the prompts print mode does not echo" if context else "Kimi's stdout"
            return Choice(chosen, "kimi", wires[:1], why + ("; usage from its wire.jsonl" if wires else ""))
    if main not in (None, UNKNOWN):
        return Choice(stdout, main, reason="the agent's stdout")
    known = {p: f for p, f in candidates.items() if f != UNKNOWN}
    if known:
        best = max(known, key=lambda p: p.stat().st_size)
        return Choice(best, known[best], reason="no readable transcript.jsonl: the largest transcript beside it")
    if stdout.is_file() and stdout.stat().st_size and mostly_text(stdout):
        return Choice(stdout, PLAIN, reason="the agent's plain output, in no transcript format: each block of lines "
                                            "is shown as one of its messages")
    return Choice(stdout, UNKNOWN, reason="no transcript in a known format") if stdout.is_file() else None


def _kimi_wire(path: Path) -> Path | None:
    """The wire log beside a Kimi context file: `wire.jsonl`, else the only `wire*.jsonl` there."""
    exact = path.with_name("wire.jsonl")
    if exact.is_file():
        return exact
    wires = sorted(path.parent.glob("wire*.jsonl"))
    return wires[0] if len(wires) == 1 else None


def load(path: str | Path) -> Session:
    """The session of a transcript file or of a run folder (see `choose`); a folder without any
    transcript gives an empty session of format `unknown`."""
    path = Path(path)
    if path.is_dir():
        choice = choose(path)
        if choice is None:
            return Session(format=UNKNOWN, path=str(path))
        if choice.format == "kimi":
            return kimi.parse_files([choice.path, *choice.extra])
        return parse_file(choice.path, choice.format)
    format = detect(path)
    if format == "kimi":  # with its wire log's usage and its subagents' files, where they are beside it
        wire = _kimi_wire(path)
        return kimi.parse_files([path, *([wire] if wire is not None else [])])
    return parse_file(path, format)


