"""OpenAI Codex CLI (`codex exec`) with its JSON event stream.

`CODEX_HOME` is pointed into the run's private home (Codex refuses to start when it names a folder
that does not exist, so it is made here). The prompt goes last, after `--`, so that a prompt that
happens to start with a subcommand's name (`resume`, `review`) is still read as the prompt.
Two config overrides keep it to its model's endpoint: `analytics.enabled=false` (no events to
ab.chatgpt.com) and `features.plugins=false` (no curated-plugin sync from github.com and
chatgpt.com at start); the run's own `args` come after them, so a `-c` there can turn either back on.

Usage: the stream's `turn.completed` events carry each turn's tokens, summed. The session's
rollout file under `$CODEX_HOME/sessions/YYYY/MM/DD/` is better where it exists: it counts
reasoning tokens and is written as the session goes, so a killed session still has one. It is read
by the transcript parser, which totals its cumulative `token_count` events (a resumed process's
restart included); each change of that total is one model call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch, Usage
from rooftop.agents.adapters.jsonl import add, count, mapping, objects
from rooftop.transcripts.detect import parse_file

ROLLOUT_PREFIX = "rollout-"
QUIET = ["-c", "analytics.enabled=false", "-c", "features.plugins=false"]  # see the module's docstring


def codex_home(home: Path) -> Path:
    return home / ".codex"


def tokens(usage: dict[str, Any]) -> Usage:
    """An OpenAI usage object: `input_tokens` already counts the cached part, as ours does."""
    return Usage(input_tokens=count(usage.get("input_tokens")), output_tokens=count(usage.get("output_tokens")),
                 cache_read_tokens=count(usage.get("cached_input_tokens")),
                 reasoning_tokens=count(usage.get("reasoning_output_tokens")))


def rollout_usage(rollout: Path) -> Usage | None:
    """One rollout's tokens, as the transcript parser totals them, and its number of model calls;
    None if it counted none."""
    session = parse_file(rollout, "codex_rollout")
    calls = sum(1 for event in session.events if event.usage is not None)
    if not calls:
        return None
    total = session.usage
    return Usage(input_tokens=total.input, output_tokens=total.output, cache_read_tokens=total.cache_read,
                 reasoning_tokens=total.reasoning, turns=calls)


class CodexAdapter(Adapter):
    name = "codex"
    usage_origin = "counted"  # summed here from its per-call records
    executable = "codex"
    key_env = ("OPENAI_API_KEY", "CODEX_API_KEY")
    endpoints = ("api.openai.com:443", "chatgpt.com:443")

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        state = codex_home(home)
        state.mkdir(parents=True, exist_ok=True)
        argv = [executable, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                "-C", str(workspace), *QUIET]
        if model:
            argv += ["-m", model]
        return Launch(argv=[*argv, *args, "--", prompt], env={"CODEX_HOME": str(state)})

    def extra_transcripts(self, home: Path) -> list[Path]:
        sessions = codex_home(home) / "sessions"
        if not sessions.is_dir():
            return []
        return sorted(p for p in sessions.rglob(f"{ROLLOUT_PREFIX}*.jsonl") if p.is_file())

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        rollouts = [u for p in extra if p.name.startswith(ROLLOUT_PREFIX) and (u := rollout_usage(p)) is not None]
        if rollouts:
            return add(rollouts)
        return add(tokens(mapping(record, "usage")) for record in objects(transcript)
                   if record.get("type") == "turn.completed")

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        """The last turn completed, and no failure was reported after it."""
        done = False
        for record in objects(transcript):
            kind = record.get("type")
            if kind == "turn.completed":
                done = True
            elif kind in ("turn.started", "turn.failed", "error"):
                done = False
        return done


ADAPTER = ADAPTERS.add(CodexAdapter.name, CodexAdapter())
