"""Claude Code (`claude`) in print mode with its stream-json output.

The prompt goes last, after `--`, so that extra arguments taking several values (`--add-dir a b`)
cannot swallow it. Claude Code refuses `--dangerously-skip-permissions` when it runs as root unless
`IS_SANDBOX=1` says it is inside a sandbox, which the agent's is. `--max-turns` is accepted though
`--help` does not list it. `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` keeps it to its model's
endpoint: no auto-update (the CLI stays the version the run records), no telemetry or error
reports, and no `HEAD /api/hello` probe of the base URL before the first call.

The stream repeats an assistant message once per content block, each line with the same
`message.id` and the same usage, so per-call usage is counted once per id. The final `result`
line holds the session's totals and cost; a killed session has none, and the per-call sum stands
in for it. The stream's assistant lines carry a call's usage as it stood when the call began (its
`output_tokens` is the first streamed figure, 1 or so), while Claude Code's own session files under
`~/.claude/projects/` have each call's final figures, written as the session goes: the sum takes a
call's usage from there where they hold its id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch, Usage
from rooftop.agents.adapters.jsonl import add, amount, count, mapping, objects, total

SYNTHETIC_MODEL = "<synthetic>"  # messages Claude Code makes up itself (e.g. "Not logged in"): no model call
ENV = {"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


def tokens(usage: dict[str, Any]) -> Usage:
    """An Anthropic usage object; its `input_tokens` leaves out the cached part, ours includes it."""
    read, write = count(usage.get("cache_read_input_tokens")), count(usage.get("cache_creation_input_tokens"))
    return Usage(input_tokens=total(count(usage.get("input_tokens")), read, write),
                 output_tokens=count(usage.get("output_tokens")), cache_read_tokens=read, cache_write_tokens=write)


def _call(record: dict[str, Any], calls: dict[str, Usage], place: str) -> None:
    """An assistant line's usage into `calls`, by its message id (one id: one model call)."""
    message = mapping(record, "message")
    usage, ident = message.get("usage"), message.get("id")
    if isinstance(usage, dict) and message.get("model") != SYNTHETIC_MODEL:
        calls[ident if isinstance(ident, str) else f"{place}-{len(calls)}"] = tokens(usage)


def _result(transcript: Path) -> tuple[dict[str, Any] | None, dict[str, Usage]]:
    """The last `result` line, and each model call's usage by message id."""
    result: dict[str, Any] | None = None
    calls: dict[str, Usage] = {}
    for record in objects(transcript):
        kind = record.get("type")
        if kind == "result":
            result = record
        elif kind == "assistant":
            _call(record, calls, "line")
    return result, calls


def session_calls(files: list[Path]) -> dict[str, Usage]:
    """Each model call's final usage by message id, from Claude Code's own session files."""
    calls: dict[str, Usage] = {}
    for path in files:
        if path.suffix == ".jsonl":
            for record in objects(path):
                if record.get("type") == "assistant":
                    _call(record, calls, path.name)
    return calls


class ClaudeAdapter(Adapter):
    name = "claude"
    executable = "claude"
    key_env = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
    endpoints = ("api.anthropic.com:443",)
    supports_max_turns = True

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        argv = [executable, "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
        if model:
            argv += ["--model", model]
        if max_turns is not None:
            argv += ["--max-turns", str(max_turns)]
        return Launch(argv=[*argv, *args, "--", prompt], env=dict(ENV))

    def extra_transcripts(self, home: Path) -> list[Path]:
        """Claude Code's own session files (the main one, and one per subagent)."""
        projects = home / ".claude" / "projects"
        return sorted(p for p in projects.rglob("*.jsonl") if p.is_file()) if projects.is_dir() else []

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        result, calls = _result(transcript)
        if result is not None and (isinstance(result.get("usage"), dict) or isinstance(result.get("modelUsage"), dict)):
            # modelUsage covers every model the session used, subagents included; `usage` the main thread only
            per_model = [m for m in mapping(result, "modelUsage").values() if isinstance(m, dict)]
            usage = add(tokens({"input_tokens": m.get("inputTokens"), "output_tokens": m.get("outputTokens"),
                                "cache_read_input_tokens": m.get("cacheReadInputTokens"),
                                "cache_creation_input_tokens": m.get("cacheCreationInputTokens")})
                        for m in per_model) if per_model else tokens(mapping(result, "usage"))
            usage.cost_usd, usage.turns = amount(result.get("total_cost_usd")), count(result.get("num_turns"))
            return usage
        calls.update(session_calls(extra))  # see the module's docstring
        if not calls:
            return Usage()
        usage = add(calls.values())
        usage.turns = len(calls)
        return usage

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        result, _ = _result(transcript)
        return result is not None and result.get("is_error") is False


ADAPTER = ADAPTERS.add(ClaudeAdapter.name, ClaudeAdapter())
