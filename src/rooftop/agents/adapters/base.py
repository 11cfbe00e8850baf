"""What an adapter is: how to start one agent CLI on a workspace, and how to read what it left.

An adapter never runs anything itself: the runner starts the command it builds (inside the
agent sandbox, with the environment the run's config names), captures its stdout as the run's
`transcript.jsonl` and its stderr as `stderr.log`, then asks the adapter for the usage and
whether the session completed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

# the largest figures believed from an agent: a 45-minute session reads tens of millions of tokens
# (cached ones included) and costs tens of dollars; past these a figure is not a count but a forgery
LIMITS = {"input_tokens": 10**9, "output_tokens": 10**9, "cache_read_tokens": 10**9, "cache_write_tokens": 10**9,
          "reasoning_tokens": 10**9, "cost_usd": 10_000.0, "turns": 100_000}


class Usage(BaseModel):
    """Tokens and cost of one agent run, as far as its transcript tells (None: not reported).

    `origin` says where the figures come from: `reported`, the CLI's own totals as it printed them;
    `counted`, summed by rooftop from the per-call records the CLI wrote. Either way they are the
    agent's word, checked (`checked`): a figure that is no count, or past `LIMITS`, is dropped and
    named in `rejected`."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None  # model calls (steps) where the transcript counts them
    origin: Literal["reported", "counted"] | None = None
    rejected: list[str] = []  # figures dropped by `checked`: "cost_usd=-100.0"

    def checked(self, origin: Literal["reported", "counted"]) -> Usage:
        """This usage with every figure outside [0, its limit] dropped and named, and its origin."""
        kept = self.model_copy(update={"origin": origin if self.reported else None, "rejected": list(self.rejected)})
        for name, limit in LIMITS.items():
            value = getattr(kept, name)
            if value is not None and not (isinstance(value, int | float) and math.isfinite(value)
                                          and 0 <= value < limit):
                kept.rejected.append(f"{name}={value!r}")
                setattr(kept, name, None)
        return kept

    @property
    def reported(self) -> bool:
        return any(getattr(self, name) is not None for name in LIMITS)


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
    usage_origin: Literal["reported", "counted"] = "reported"  # see Usage.origin

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
