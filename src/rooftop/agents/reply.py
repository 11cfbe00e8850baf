"""A kernel asked for in one reply (search, inspect_ai): the task as the model reads it, and the
file taken back out of what it answers."""

from __future__ import annotations

import re

from rooftop.env.prompt import task_body
from rooftop.problem.spec import Problem

CODE_BLOCK = re.compile(r"```(?:python|py)[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(reply: str) -> str | None:
    """The last ```python block of a reply (models think aloud in earlier ones), or None."""
    blocks = CODE_BLOCK.findall(reply)
    return blocks[-1].strip("\n") + "\n" if blocks and blocks[-1].strip() else None


def reply_task(problem: Problem, group: str) -> str:
    """The task on a group of shapes, with the reference's code where a problem's own PROMPT.md
    only names the file (a model answering in one reply has no workspace to read it from)."""
    text = task_body(problem, group).rstrip() + "\n"
    reference = problem.reference.read_text().rstrip()
    if reference not in text:
        text += f"\n## {problem.reference.name}\n\n```python\n{reference}\n```\n"
    return text
