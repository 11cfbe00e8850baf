"""Claude Code (`claude`) in print mode with its stream-json output.

The prompt goes last, after `--`, so that extra arguments taking several values (`--add-dir a b`)
cannot swallow it. Claude Code refuses `--dangerously-skip-permissions` when it runs as root unless
`IS_SANDBOX=1` says it is inside a sandbox, which the agent's is. `--max-turns` is accepted though
`--help` does not list it. `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` keeps it to its model's
endpoint: no auto-update (the CLI stays the version the run records), no telemetry or error
reports, and no `HEAD /api/hello` probe of the base URL before the first call.

Usage is the transcript parser's (`rooftop.transcripts.parsers.claude.run_usage`): the final
`result` line's totals, cost and turns; for a killed session, each call's usage counted once per
message id, its final figures taken from Claude Code's own session files under
`~/.claude/projects/` (the stream has them as the call began).
"""

from __future__ import annotations

from pathlib import Path

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.agents.adapters.jsonl import last_of_type
from rooftop.transcripts.parsers import claude
from rooftop.transcripts.usage import Usage

ENV = {"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


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
        return claude.run_usage(transcript, extra)

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        result = last_of_type(transcript, "result")
        return result is not None and result.get("is_error") is False


ADAPTER = ADAPTERS.add(ClaudeAdapter.name, ClaudeAdapter())
