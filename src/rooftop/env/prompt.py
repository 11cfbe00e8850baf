"""What an episode shows its agent: the task, the shapes it may see, and the tools.

Held-out shapes never appear here: not their names, parameters or notes. A problem's own
PROMPT.md is written to that rule (tests/test_env.py checks every bundled one); a problem without
one gets a prompt made from its spec, its reference code and its visible shapes.
"""

from __future__ import annotations

from pydantic import BaseModel

from rooftop.problem.spec import Problem

TOOLS = """\
## Tools

- `run_kernel(code)`: evaluate `code`, a complete Python file defining `ModelNew`, on the shapes
  above. You get its status, error messages, and per shape its correctness, time, speedup over
  the reference and fraction of the hardware roof.
- `finish()`: end the episode. Your best kernel so far is then graded on more shapes than you
  have seen, so write it for any shape, not only these.
"""


class TaskCard(BaseModel):
    """A task as an agent or a trainer may list it: nothing held out."""

    name: str
    title: str
    description: str
    dtype: str
    shapes: list[dict[str, object]]


def task_card(problem: Problem, group: str = "visible") -> TaskCard:
    spec = problem.spec
    return TaskCard(name=problem.name, title=spec.title, description=spec.description,
                    dtype=spec.dtype, shapes=[{"name": s.name, "params": dict(s.params), "note": s.note}
                                              for s in problem.spec.select(group)])


def task_prompt(problem: Problem, group: str = "visible", max_turns: int | None = None) -> str:
    body = task_body(problem, group)
    budget = f"\nYou have {max_turns} tool calls.\n" if max_turns else ""
    return f"{body}\n{TOOLS}{budget}"


def task_body(problem: Problem, group: str = "visible") -> str:
    """The task itself, tools aside: the problem's PROMPT.md for its visible shapes, else one made
    from its spec, reference and the group's shapes."""
    if problem.prompt is not None and group == "visible":
        return problem.prompt.read_text().rstrip() + "\n"
    return _made_prompt(problem, group)


def _made_prompt(problem: Problem, group: str) -> str:
    spec = problem.spec
    shapes = problem.spec.select(group)
    names = sorted({k for s in shapes for k in s.params})
    rows = ["| name | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    rows += [f"| {s.name} | " + " | ".join(str(s.params.get(k, "")) for k in names) + " |" for s in shapes]
    forbidden = ", ".join(f"`{f}`" for f in spec.policy.forbidden) if spec.policy.forbidden else ""
    return "\n".join([
        f"# {spec.title}", "",
        spec.description, "",
        "Write a faster `ModelNew` for the reference below: same constructor arguments as `Model`, same "
        "outputs from `forward`, on the evaluation device. Weights are copied from the reference.",
        *([f"Not allowed: {forbidden}."] if forbidden else []), "",
        "## Reference", "", "```python", problem.reference.read_text().rstrip(), "```", "",
        f"## Shapes ({spec.dtype})", "", *rows, "",
    ])
