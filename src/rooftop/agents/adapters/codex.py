"""OpenAI Codex CLI (`codex exec`) with its JSON event stream.

`CODEX_HOME` is pointed into the run's private home (Codex refuses to start when it names a folder
that does not exist, so it is made here). The prompt goes last, after `--`, so that a prompt that
happens to start with a subcommand's name (`resume`, `review`) is still read as the prompt.
Two config overrides keep it to its model's endpoint: `analytics.enabled=false` (no events to
ab.chatgpt.com) and `features.plugins=false` (no curated-plugin sync from github.com and
chatgpt.com at start); the run's own `args` come after them, so a `-c` there can turn either back on.

Usage is the transcript parser's (`rooftop.transcripts.parsers.codex_exec.run_usage`): the
session rollout files under `$CODEX_HOME/sessions/YYYY/MM/DD/` where they exist (they count
reasoning tokens and are written as the session goes, so a killed session still has one; each
change of their cumulative total is one model call), else the stream's `turn.completed` tokens.
"""

from __future__ import annotations

from pathlib import Path

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.agents.adapters.jsonl import objects
from rooftop.transcripts.parsers import codex_exec
from rooftop.transcripts.usage import Usage

ROLLOUT_PREFIX = "rollout-"
QUIET = ["-c", "analytics.enabled=false", "-c", "features.plugins=false"]  # see the module's docstring


def codex_home(home: Path) -> Path:
    return home / ".codex"


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
        return codex_exec.run_usage(transcript, [p for p in extra if p.name.startswith(ROLLOUT_PREFIX)])

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
