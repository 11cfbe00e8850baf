"""Any other agent: the whole command line comes from the config's `args`, as a template.

Each element may hold `{prompt}`, `{prompt_file}` (the workspace's PROMPT.md), `{workspace}`,
`{model}` and `{max_turns}` (empty where not set); other braces are left alone, so JSON in an
argument needs no escaping. The prompt is also written to the command's stdin, for tools that read
it there. Its first element is the program, which the runner resolves as it does an adapter's
`executable`.

Nothing is known of the command's output: it completed when it exited 0, and its usage is taken
only from a last line `{"usage": {...}}` using this package's field names, where it writes one.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from rooftop.agents.adapters import ADAPTERS
from rooftop.agents.adapters.base import Adapter, Launch
from rooftop.agents.adapters.jsonl import last_value
from rooftop.errors import UserError
from rooftop.transcripts.usage import Usage

PROMPT_FILE = "PROMPT.md"
PLACEHOLDER = re.compile(r"\{(prompt|prompt_file|workspace|model|max_turns)\}")


def template(args: list[str]) -> list[str]:
    """The command template, checked: a configuration naming the `command` adapter must give one."""
    if not args or not args[0].strip():
        raise UserError("args: the command adapter needs the whole command line in `args` "
                        "(e.g. [\"my-agent\", \"--model\", \"{model}\", \"{prompt_file}\"])")
    return args


def program(args: list[str]) -> str:
    """What the runner resolves and starts: the template's first element."""
    return template(args)[0]


class CommandAdapter(Adapter):
    name = "command"
    executable = ""  # the first element of `args`, per configuration
    supports_max_turns = True  # as far as the template passes `{max_turns}` on

    def program(self, args: list[str]) -> str:
        return program(args)

    def launch(self, *, executable: str, prompt: str, workspace: Path, home: Path, model: str | None,
               max_turns: int | None, args: list[str]) -> Launch:
        fields = {"prompt": prompt, "prompt_file": str(workspace / PROMPT_FILE), "workspace": str(workspace),
                  "model": model or "", "max_turns": "" if max_turns is None else str(max_turns)}

        def fill(element: str) -> str:  # one pass: a prompt that contains "{workspace}" keeps it
            return PLACEHOLDER.sub(lambda found: fields[found.group(1)], element)

        first, *rest = template(args)
        return Launch(argv=[executable or fill(first), *map(fill, rest)], stdin=prompt)

    def usage(self, transcript: Path, extra: list[Path]) -> Usage:
        last = last_value(transcript)
        if not isinstance(last, dict) or not isinstance(last.get("usage"), dict):
            return Usage()
        try:
            return Usage.model_validate({k: v for k, v in last["usage"].items() if k in Usage.model_fields})
        except ValidationError:
            return Usage()


ADAPTER = ADAPTERS.add(CommandAdapter.name, CommandAdapter())
