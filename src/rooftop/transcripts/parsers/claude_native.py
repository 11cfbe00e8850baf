"""Claude Code's own session files (`~/.claude/projects/<project>/<session>.jsonl`, and a subagent's
`<session>/subagents/agent-<id>.jsonl`).

Records are `user`, `assistant` (API-shaped `message`, one content block per line), `system`,
`attachment`, and bookkeeping (`queue-operation`, `last-prompt`, `file-history-snapshot`,
`summary`, `progress`; 2.1.332 also writes `api-request` with its `api-request-blob` and
`api-request-shape` copies of what was sent, `tools-used`, `atis-latch` and `cost-state`), tied in a
tree by `uuid`/`parentUuid`, with `isSidechain` on a subagent's lines and the structured tool result
as `toolUseResult`. There is no closing record: usage is the per-message usage summed once per
message id, the cost is the last `cost-state`'s total where there is one, and `completed` is None.

A subagent file alone does not say which tool call started it (only its `agentId`, which the main
file's Agent result repeats), so its events are `sidechain` without a `parent`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rooftop.transcripts.build import Builder, amount, items, mapping, string, text_of, when
from rooftop.transcripts.events import Session
from rooftop.transcripts.lines import Record
from rooftop.transcripts.parsers import PARSERS, Parser, _anthropic
from rooftop.transcripts.usage import usage_sum

FORMAT = "claude_native"
PRIORITY = 70
BOOKKEEPING = {"queue-operation", "last-prompt", "file-history-snapshot", "summary", "progress", "attachment",
               "system", "custom-title", "agent-name", "api-request", "api-request-blob", "api-request-shape",
               "tools-used", "atis-latch", "cost-state", "ai-title"}


def sniff(records: list[Any]) -> bool:
    for record in records:
        if not isinstance(record, dict):
            continue
        if "sessionId" in record and ("parentUuid" in record or string(record.get("type")) in BOOKKEEPING):
            return True
        if record.get("type") == "file-history-snapshot" and "messageId" in record:
            return True
        if record.get("type") == "summary" and "leafUuid" in record:
            return True
    return False


def _bookkeeping_text(record: dict[str, Any]) -> str | None:
    kind = record.get("type")
    if kind == "attachment":
        attachment = mapping(record, "attachment")
        content = attachment.get("content")
        return text_of(content) if content else string(attachment.get("type"))
    if kind == "last-prompt":
        return string(record.get("lastPrompt"))
    if kind == "summary":
        return string(record.get("summary"))
    if kind == "queue-operation":
        return " ".join(p for p in (string(record.get("operation")), string(record.get("content"))) if p) or None
    if kind == "system":
        return string(record.get("content")) or string(record.get("subtype"))
    if kind == "api-request":
        return string(mapping(record, "params").get("model"))
    if kind == "ai-title":
        return string(record.get("aiTitle"))
    if kind == "tools-used":
        return ", ".join(t for t in items(record.get("tools")) if isinstance(t, str)) or None
    if kind == "cost-state" and (cost := amount(record.get("totalCostUSD"))) is not None:
        return f"${cost:.4f} so far"
    return None  # the request copies are kept in the file, not shown


def parse(records: Iterable[Record], path: str | None = None, calls: _anthropic.Calls | None = None) -> Session:
    """`calls`, where given, is filled with the session's tool calls and model calls by id."""
    b = Builder(FORMAT, path)
    s = b.session
    calls = calls if calls is not None else _anthropic.Calls()
    for line, record in b.walk(records):
        with b.guard(line, record):
            kind = string(record.get("type"))
            side = {"sidechain": record.get("isSidechain") is True, "timestamp": when(record.get("timestamp"))}
            s.session_id = s.session_id or string(record.get("sessionId"))
            s.cwd = s.cwd or string(record.get("cwd"))
            if s.agent is None and isinstance(record.get("version"), str):
                s.agent = f"claude-code {record['version']}"
            if kind == "assistant":
                event = _anthropic.assistant(b, line, mapping(record, "message"), calls, **side)
                if s.model is None and event.model not in (None, _anthropic.SYNTHETIC_MODEL):
                    s.model = event.model
            elif kind == "user":
                _anthropic.user(b, line, mapping(record, "message"), record.get("toolUseResult"), calls, **side)
            elif kind in BOOKKEEPING:
                if kind == "cost-state":
                    s.cost_usd = amount(record.get("totalCostUSD"))
                subtype = mapping(record, "attachment").get("type") or record.get("subtype")
                b.add(line, "system", f"{kind}.{subtype}" if isinstance(subtype, str) else str(kind),
                      text=_bookkeeping_text(record), **side)
            else:
                b.raw(line, record, str(kind or ""))
    s.usage = usage_sum(e.usage for e in s.events)
    return b.finish()


PARSERS.add(FORMAT, Parser(FORMAT, PRIORITY, sniff, parse))
