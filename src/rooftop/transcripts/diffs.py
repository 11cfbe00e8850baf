"""Unified diffs of the file changes agents make, whatever form the CLI records them in.

CLIs record a change as a whole new file (Write), a replaced snippet (Edit), hunks (Claude's
structuredPatch) or a patch in Codex's own grammar. A viewer wants one thing, a unified diff, so
each is turned into one here. A session's `Files` remembers what each file held as far as the
transcript shows, so that a later whole-file write or edit diffs against it with line numbers,
computed here and said so on the diff's `---` line (a label after a tab, as `diff -u` puts a date);
where the earlier content is unknown, an edit shows its snippet alone under a bare `@@` (no line
numbers: the transcript gives none), and a write of a file never seen before diffs against an empty
file. Hunks a CLI numbers itself (Claude's structuredPatch) keep its numbers; a Codex patch's hunks
that cannot be placed are shown as the patch gives them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

NO_NEWLINE = "\\ No newline at end of file\n"
COMPUTED = "line numbers computed from the file as the transcript last showed it"


def _name(path: str, side: str) -> str:
    return path if path.startswith("/") else f"{side}/{path}"


def header(path: str, before: str | None, after: str | None, new_path: str | None = None,
           label: str | None = None) -> str:
    old = "/dev/null" if before is None else _name(path, "a")
    new = "/dev/null" if after is None else _name(new_path or path, "b")
    return f"--- {old}{chr(9) + '(' + label + ')' if label else ''}\n+++ {new}\n"


def _terminated(lines: Iterable[str]) -> str:
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out)


def unified(path: str, before: str | None, after: str | None, new_path: str | None = None) -> str:
    """The diff from `before` to `after` (None: the file did not exist / no longer exists); its line
    numbers are computed from `before`, which its header says where there was one."""
    hunks = list(difflib.unified_diff((before or "").splitlines(keepends=True),
                                      (after or "").splitlines(keepends=True)))[2:]
    return header(path, before, after, new_path, COMPUTED if before else None) + _terminated(hunks)


def from_hunks(path: str, hunks: list[Any]) -> str | None:
    """Claude Code's structuredPatch (`oldStart`, `oldLines`, `newStart`, `newLines`, `lines`) as a
    unified diff; None if it holds no hunk."""
    out = []
    for hunk in hunks:
        if not isinstance(hunk, dict) or not isinstance(hunk.get("lines"), list):
            continue
        numbers = [hunk.get(k) for k in ("oldStart", "oldLines", "newStart", "newLines")]
        if not all(isinstance(n, int) for n in numbers):
            continue
        out.append("@@ -{},{} +{},{} @@\n".format(*numbers))
        out.append("".join(f"{line}\n" for line in hunk["lines"]))
    return header(path, "", "") + "".join(out) if out else None


def _body(diff: str) -> str:
    """A one-file diff without its two header lines."""
    return diff.split("\n", 2)[2]


def snippet(path: str, old: str, new: str) -> str:
    """An edit of a file whose content is unknown: the replaced snippet alone (as whole lines), under
    a bare `@@`, since where it lies in the file is not known."""
    def lines(text: str) -> list[str]:
        return text.splitlines(keepends=True)

    body = [line for line in difflib.unified_diff(lines(old), lines(new), n=10**6)][2:]
    body = [line if line.endswith("\n") else line + "\n" for line in body if not line.startswith("@@")]
    return header(path, "", "") + "@@\n" + "".join(body)


@dataclass
class Files:
    """What each file held, as far as the transcript has shown it (writes, full reads, edits)."""

    content: dict[str, str] = field(default_factory=dict)

    def get(self, path: str) -> str | None:
        return self.content.get(path)

    def set(self, path: str, text: str | None) -> None:
        if text is None:
            self.content.pop(path, None)
        else:
            self.content[path] = text

    def write(self, path: str, text: str) -> str:
        """A whole-file write: its diff against what the file held (nothing, if it was never seen)."""
        before = self.get(path)
        self.set(path, text)
        return unified(path, before, text)

    def edit(self, path: str, edits: list[tuple[str, str, bool]]) -> str:
        """Snippet replacements (old, new, replace_all) in order: a real diff where the file is known
        and every snippet is found in it, else the snippets alone (and the file is known no more)."""
        before = self.get(path)
        after = before
        for old, new, every in edits:
            if after is None or not old or old not in after:
                after = None
                break
            after = after.replace(old, new) if every else after.replace(old, new, 1)
        if before is not None and after is not None:
            self.set(path, after)
            return unified(path, before, after)
        self.set(path, None)
        return header(path, "", "") + "".join(_body(snippet(path, old, new)) for old, new, _ in edits)


# Codex's patch grammar: *** Begin Patch / *** Add File: p / *** Update File: p [*** Move to: q] /
# *** Delete File: p, each with its lines (+ added, - removed, space context, @@ starting a hunk).
_OP = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$")
_MOVE = re.compile(r"^\*\*\* Move to: (.+)$")


@dataclass
class FilePatch:
    kind: str  # add, update, delete
    path: str
    move_to: str | None = None
    lines: list[str] = field(default_factory=list)


def parse_patch(text: str) -> list[FilePatch]:
    """The file operations of a Codex patch, in order; text outside the grammar is ignored."""
    ops: list[FilePatch] = []
    for line in text.splitlines():
        if line.startswith("*** Begin Patch") or line.startswith("*** End Patch"):
            continue
        if (op := _OP.match(line)) is not None:
            ops.append(FilePatch(op.group(1).lower(), op.group(2).strip()))
        elif ops and (move := _MOVE.match(line)) is not None:
            ops[-1].move_to = move.group(1).strip()
        elif ops and line != "*** End of File":
            ops[-1].lines.append(line)
    return ops


def _hunks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """An update's hunks: (context after @@, body lines), the body's lines keeping their prefix."""
    hunks: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("@@"):
            hunks.append((line[2:].strip(), []))
        else:
            if not hunks:
                hunks.append(("", []))
            hunks[-1][1].append(line if line[:1] in ("+", "-", " ") else " " + line)
    return [h for h in hunks if h[1]]


def _apply(before: str, hunks: list[tuple[str, list[str]]]) -> str | None:
    """`before` with the hunks applied, or None where one does not match it."""
    lines = before.splitlines()
    at = 0
    for context, body in hunks:
        if context:
            found = next((i for i in range(at, len(lines)) if context in lines[i]), None)
            if found is None:
                return None
            at = found + 1
        old = [line[1:] for line in body if line[0] in " -"]
        new = [line[1:] for line in body if line[0] in " +"]
        start = next((i for i in range(at, len(lines) - len(old) + 1) if lines[i:i + len(old)] == old), None)
        if start is None:
            return None
        lines[start:start + len(old)] = new
        at = start + len(new)
    return "\n".join(lines) + "\n" if lines else ""


def _hunk_text(hunks: list[tuple[str, list[str]]]) -> str:
    """Hunks whose place in the file is unknown, as the patch gives them: `@@` and its context line,
    no line numbers."""
    return "".join(f"@@{' ' + context if context else ''}\n" + "".join(line + "\n" for line in body)
                   for context, body in hunks)


def patch_diffs(text: str, files: Files) -> list[tuple[str, str]]:
    """(path, unified diff) for each file a Codex patch touches, in order."""
    out = []
    for op in parse_patch(text):
        before = files.get(op.path)
        if op.kind == "add":
            after = "".join(line[1:] + "\n" for line in op.lines if line.startswith("+"))
            files.set(op.path, after)
            out.append((op.path, unified(op.path, None, after)))
        elif op.kind == "delete":
            files.set(op.path, None)
            out.append((op.path, unified(op.path, before, None) if before is not None else header(op.path, "", None)))
        else:
            hunks = _hunks(op.lines)
            patched = _apply(before, hunks) if before is not None else None
            target = op.move_to or op.path
            if op.move_to:
                files.set(op.path, None)
            if before is not None and patched is not None:
                files.set(target, patched)
                out.append((op.path, unified(op.path, before, patched, op.move_to)))
            else:
                files.set(target, None)
                out.append((op.path, header(op.path, "", "", op.move_to) + _hunk_text(hunks)))
    return out


def paths(diff: str) -> list[str]:
    """The files a (possibly multi-file) unified diff touches, from its `+++`/`---` headers."""
    found: list[str] = []
    old = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            old = line[4:].split("\t", 1)[0]
        elif line.startswith("+++ ") and old is not None:
            name = line[4:].split("\t", 1)[0]
            name = name if name != "/dev/null" else old
            name = name[2:] if name.startswith(("a/", "b/")) else name
            if name not in found:
                found.append(name)
            old = None
    return found
