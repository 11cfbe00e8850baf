"""`codex exec` plain-text stdout (no `--json`), read into a minimal session.

The text opens with a header (`OpenAI Codex vX`, then `key: value` lines: workdir, model, session
id...), then sections, each introduced by a marker line: `user`, `thinking`, `codex`, `exec`,
`file update` (a patch about to be applied), `apply_patch(...) exited N in T:` (its outcome),
`file update:` (the turn's diff so far), `mcp...` notes, and `tokens used` with a total, after which
the last message is printed again. Every section becomes an event at its marker's line, so no line
is left out. Parallel commands glue the next `exec` marker to the end of the previous command line
(`... in /workdirexec`); such a line is split where the workdir ends.

What this text cannot give: per-call usage (only the blended `tokens used` total, kept in the
result event's `raw`, as Usage has no field for it), timestamps, and which output belongs to
which of several parallel commands.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder
from rooftop.transcripts.diffs import header
from rooftop.transcripts.events import Session, ToolCall, ToolResult
from rooftop.transcripts.lines import Record, Text
from rooftop.transcripts.parsers import PARSERS, Parser

FORMAT = "codex_text"
PRIORITY = 5  # its banner is unmistakable, and JSON printed in its output must not mislead
BANNER = "OpenAI Codex v"
MARKERS = {"user", "thinking", "codex", "exec", "file update", "file update:", "tokens used"}
_APPLIED = re.compile(r"^apply_patch\(.*\) (succeeded|exited (-?\d+)) in [\d.]+m?s:$")
_STATUS = re.compile(r" (succeeded|exited (-?\d+)) in [\d.]+m?s:$")
_CHANGE = re.compile(r"^([AMD]) (.+)$")


def sniff(records: list[Any]) -> bool:
    return bool(records) and isinstance(records[0], Text) and records[0].raw.startswith(BANNER)


def _marker(line: str) -> bool:
    return line in MARKERS or line.startswith(("mcp: ", "mcp startup:")) or _APPLIED.match(line) is not None


def _sections(lines: Iterable[tuple[int, str]]) -> Iterable[tuple[int, str, list[str]]]:
    """(marker line number, marker, body lines); the header's marker is ''."""
    number, marker = 1, ""
    body: list[str] = []
    workdir = None
    for line, text in lines:
        if workdir is None and text.startswith("workdir: "):
            workdir = text[len("workdir: "):].strip()
        glued = None
        if workdir and not _marker(text):
            for candidate in ("exec", "codex", "thinking"):
                match = re.search(rf" in (\S+){candidate}$", text)
                if match and match.group(1).startswith(workdir) and match.group(1) + candidate != workdir:
                    glued, text = candidate, text[:-len(candidate)]
                    break
        if _marker(text) and not glued:
            yield number, marker, body
            number, marker, body = line, text, []
        else:
            body.append(text)
            if glued:
                yield number, marker, body
                number, marker, body = line, glued, []
    yield number, marker, body


def _header(b: Builder, line: int, body: list[str]) -> None:
    s = b.session
    fields = dict(entry.split(": ", 1) for entry in body if ": " in entry)
    s.model, s.session_id, s.cwd = fields.get("model"), fields.get("session id"), fields.get("workdir")
    banner = next((entry for entry in body if entry.startswith(BANNER)), None)
    s.agent = "codex " + banner[len(BANNER):].split()[0] if banner and banner[len(BANNER):].strip() else "codex"
    b.add(line, "system", "header", text="\n".join(body).strip() or None)


def _patch(body: list[str]) -> tuple[str | None, str | None]:
    """The file and a unified diff of a `file update` section (`M /path` then hunks)."""
    if any(entry.startswith("diff --git") for entry in body):
        path = next((entry.split(" b/", 1)[-1] for entry in body if entry.startswith("diff --git")), None)
        return path, "\n".join(body).strip() + "\n"
    change = _CHANGE.match(body[0]) if body else None
    if change is None:
        return None, None
    path = change.group(2).strip()
    before = None if change.group(1) == "A" else ""
    after = None if change.group(1) == "D" else ""
    hunks = body[1:]
    while hunks and not hunks[-1].strip():
        hunks.pop()
    return path, header(path, before, after) + "".join(entry + "\n" for entry in hunks)


def parse(records: Iterable[Record], path: str | None = None) -> Session:
    b = Builder(FORMAT, path)
    s = b.session

    def lines() -> Iterable[tuple[int, str]]:
        for line, value in records:
            s.lines += 1
            yield line, value.raw if isinstance(value, Text) else str(value)

    last_patch: str | None = None
    for line, marker, body in _sections(lines()):
        text = "\n".join(body).strip("\n") or None
        if marker == "":
            _header(b, line, body)
        elif marker == "user":
            b.add(line, "user", marker, text=text)
        elif marker == "thinking":
            b.add(line, "assistant", marker, reasoning=text)
        elif marker == "codex":
            b.add(line, "assistant", marker, text=text)
        elif marker == "exec":
            at = next((i for i, entry in enumerate(body) if _STATUS.search(entry)), None)
            command = body if at is None else [*body[:at], _STATUS.sub("", body[at])]
            ident = f"exec-{line}"
            b.add(line, "assistant", marker, tool_calls=[ToolCall(id=ident, name="exec",
                                                                  arguments={"command": "\n".join(command).strip()})])
            if at is not None:
                status = _STATUS.search(body[at])
                failed = status is not None and status.group(2) not in (None, "0")
                b.add(line, "tool", marker, tool_result=ToolResult(call_id=ident, content="\n".join(body[at + 1:]),
                                                                    is_error=failed))
        elif marker == "file update":
            file_path, diff = _patch(body)
            last_patch = f"apply_patch-{line}"
            b.add(line, "assistant", marker, tool_calls=[ToolCall(id=last_patch, name="apply_patch", arguments=text,
                                                                  file_path=file_path, diff=diff)])
        elif (applied := _APPLIED.match(marker)) is not None:
            failed = applied.group(2) not in (None, "0")
            b.add(line, "tool", "apply_patch", tool_result=ToolResult(call_id=last_patch, content=text or "",
                                                                       is_error=failed))
        elif marker == "tokens used":
            figure = next((entry for entry in body if entry.strip()), "")
            digits = figure.replace(",", "").strip()
            rest = "\n".join(body[body.index(figure) + 1:]).strip() if figure else ""
            b.add(line, "result", marker, text=rest or None,
                  raw={"tokens_used": int(digits)} if digits.isdigit() else {"tokens_used": figure})
            s.completed, s.final_text = True, rest or None
        else:
            b.add(line, "system", marker.rstrip(":"), text=text if marker.startswith("file update") else marker)
    return b.finish(closing_record=True)


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse, text=True))
