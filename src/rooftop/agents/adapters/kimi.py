"""Kimi Code CLI (`kimi`) in print mode with its stream-json output.

Print mode reads the prompt from stdin when none is given on the command line, which keeps it out
of argv; it approves every tool call by itself. `--max-steps-per-turn` bounds the model calls of
the one turn a print-mode run has.

The stream is bare chat messages, without usage: each `assistant` line is one step (one model
call). Kimi's session folder under `~/.kimi/sessions/` holds `wire.jsonl`, whose `StatusUpdate`
events carry each step's tokens; usage is the transcript parser's reading of both
(`rooftop.transcripts.parsers.kimi.run_usage`).
"""

from __future__ import annotations

from pathlib import Path

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.agents.adapters.jsonl import objects
from rooftop.transcripts.parsers import kimi
from rooftop.transcripts.usage import Usage

WIRE = "wire"


class KimiAdapter(Adapter):
    name = "kimi"
    usage_origin = "counted"  # summed here from its per-call records
    executable = "kimi"
    key_env = ("KIMI_API_KEY",)
    endpoints = ("api.moonshot.ai:443", "api.moonshot.cn:443", "api.kimi.com:443")
    supports_max_turns = True

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        argv = [executable, "--print", "--output-format", "stream-json", "-w", str(workspace)]
        if model:
            argv += ["-m", model]
        if max_turns is not None:
            argv += ["--max-steps-per-turn", str(max_turns)]
        return Launch(argv=[*argv, *args], stdin=prompt)

    def extra_transcripts(self, home: Path) -> list[Path]:
        sessions = home / ".kimi" / "sessions"
        return sorted(p for p in sessions.rglob("*.jsonl") if p.is_file()) if sessions.is_dir() else []

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        return kimi.run_usage(transcript, [p for p in extra if p.name.startswith(WIRE) and p.suffix == ".jsonl"])

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        """It exited 0 having answered at least once (print mode's exit status says little more)."""
        return exit_code == 0 and any(record.get("role") == "assistant" for record in objects(transcript))


ADAPTER = ADAPTERS.add(KimiAdapter.name, KimiAdapter())
