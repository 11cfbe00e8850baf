"""opencode (`opencode run`) with its JSON event stream.

Without `--auto`, `opencode run` rejects every permission request it gets (there is nobody to
ask), so it is always given. The prompt goes last, after `--`. Models are named provider/model.

Each model call ends in a `step_finish` event with that step's tokens and cost, summed here;
opencode's `tokens.input` leaves out the cached part, ours includes it. The session ended on its
own when its last step finished for reason `stop`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch, Usage
from rooftop.agents.adapters.jsonl import add, amount, count, mapping, objects, total
from rooftop.errors import UserError


def _steps(transcript: Path) -> list[dict[str, Any]]:
    return [mapping(record, "part") for record in objects(transcript) if record.get("type") == "step_finish"]


def step_usage(part: dict[str, Any]) -> Usage:
    tokens = mapping(part, "tokens")
    cache = mapping(tokens, "cache")
    read, write = count(cache.get("read")), count(cache.get("write"))
    return Usage(input_tokens=total(count(tokens.get("input")), read, write), output_tokens=count(tokens.get("output")),
                 cache_read_tokens=read, cache_write_tokens=write, reasoning_tokens=count(tokens.get("reasoning")),
                 cost_usd=amount(part.get("cost")), turns=1)


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
        return add(step_usage(part) for part in _steps(transcript))

    def completed(self, transcript: Path, exit_code: int | None) -> bool:
        steps = _steps(transcript)
        return exit_code == 0 and bool(steps) and steps[-1].get("reason") == "stop"


ADAPTER = ADAPTERS.add(OpencodeAdapter.name, OpencodeAdapter())
