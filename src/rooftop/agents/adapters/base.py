"""What an adapter is: how to start one agent CLI on a workspace, and how to read what it left.

An adapter never runs anything itself: the runner starts the command it builds (inside the
agent sandbox, with the environment the run's config names), captures its stdout as the run's
`transcript.jsonl` and its stderr as `stderr.log`, then asks the adapter for the usage and
whether the session completed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from rooftop.transcripts.usage import Origin, Usage


class Launch(BaseModel):
    """The command to start: argv (argv[0] is the executable as resolved by the runner), the
    prompt on stdin where the CLI reads it there, and extra non-secret environment variables
    (e.g. where the CLI keeps its session files, under the run's private home)."""

    argv: list[str]
    stdin: str | None = None
    env: dict[str, str] = {}


class Adapter:
    """One agent CLI. Subclasses set the class attributes and override what differs."""

    name: str = ""
    executable: str = ""  # the binary looked up on PATH unless the config names another
    key_env: tuple[str, ...] = ()  # environment variables that usually carry its API key
    # host:port its provider serves at, reached from the sandbox unless the config lists others
    endpoints: tuple[str, ...] = ()
    supports_max_turns: bool = False
    usage_origin: Origin = "reported"  # see Usage.origin

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        raise NotImplementedError

    def program(self, args: list[str]) -> str:
        """The CLI to start when the config names none."""
        return self.executable

    def version_argv(self, executable: str) -> list[str]:
        return [executable, "--version"]

    def extra_transcripts(self, home: Path) -> list[Path]:
        """Session files the CLI wrote under the run's private home besides its stdout (copied
        into the run folder next to `transcript.jsonl`)."""
        return []

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        return Usage()

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        """Whether the session ran to its own end (not killed, not cut off by an error)."""
        return exit_code == 0
