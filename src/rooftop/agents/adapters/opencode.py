"""opencode (`opencode run`) with its JSON event stream.

Without `--auto`, `opencode run` rejects every permission request it gets (there is nobody to
ask), so it is always given. The prompt goes last, after `--`. Models are named provider/model.

Each model call ends in a `step_finish` event with that step's tokens and cost, which the
transcript parser sums (`rooftop.transcripts.parsers.opencode`). The session ended on its own when
its last step finished for reason `stop`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.agents.adapters.jsonl import mapping, objects
from rooftop.errors import UserError
from rooftop.transcripts.parsers import parser
from rooftop.transcripts.spent import spent
from rooftop.transcripts.usage import Usage


def _steps(transcript: Path) -> list[dict[str, Any]]:
    return [mapping(record, "part") for record in objects(transcript) if record.get("type") == "step_finish"]


class OpencodeAdapter(Adapter):
    name = "opencode"
    usage_origin = "counted"  # summed here from its per-call records
    executable = "opencode"
    key_env = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "OPENCODE_API_KEY")
    endpoints = ("opencode.ai:443",)

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        argv = [executable, "run", "--format", "json", "--auto"]
        if model:
            if "/" not in model:
                raise UserError(f"model: opencode names models provider/model (e.g. anthropic/claude-sonnet-4-5), "
                                f"not '{model}'")
            argv += ["-m", model]
        return Launch(argv=[*argv, *args, "--", prompt])

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        session = parser("opencode").read(transcript)
        return spent(session, sum(1 for event in session.events if event.kind == "step_finish") or None)

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        steps = _steps(transcript)
        return exit_code == 0 and bool(steps) and steps[-1].get("reason") == "stop"


ADAPTER = ADAPTERS.add(OpencodeAdapter.name, OpencodeAdapter())
