"""An agent run as the run folder (`run.json`) and the store (`agent_runs`) keep it."""

from __future__ import annotations

from pydantic import BaseModel

from rooftop.transcripts.usage import Usage
from rooftop.verdict import ShapeResult, Verdict


class Grade(BaseModel):
    """One grading of the run's final solution: its job in the store and the headline figures."""

    shapes: str  # the shape group: visible (or smoke) for the visible verdict; all for the graded one
    job: str | None = None
    status: str  # a verdict status, or no_solution / internal_error
    reward: float | None = None
    speedup: float | None = None  # geometric mean over the group's shapes
    roofline: float | None = None
    held_out_shapes: int = 0
    held_out_correct: int = 0
    held_out_speedup: float | None = None  # geometric mean over the held-out shapes alone
    message: str | None = None

    @classmethod
    def of(cls, shapes: str, job: str | None, verdict: Verdict) -> Grade:
        from rooftop.score.aggregate import geomean

        def over(rows: list[ShapeResult]) -> float | None:
            # as the verdict's summary: a shape timed on a shared CPU measured a neighbour
            return geomean(r.speedup for r in rows if "contention" not in r.flags)

        held = [r for r in verdict.shapes if r.split == "held_out"]
        return cls(shapes=shapes, job=job, status=verdict.status.value, reward=verdict.reward,
                   speedup=verdict.summary.geomean_speedup,
                   roofline=verdict.summary.geomean_roofline,
                   held_out_shapes=len(held), held_out_correct=sum(bool(r.correct) for r in held),
                   held_out_speedup=over(held),
                   message=verdict.messages[0][:500] if verdict.messages else None)


class AgentRun(BaseModel):
    """Everything about one run (agent x model x problem x repeat) but its files."""

    id: str
    sweep: str | None = None
    agent: str  # the config's label for the agent
    adapter: str
    model: str | None = None
    problem: str
    repeat: int = 0
    state: str = "running"  # running, done, failed (the harness could not run it), abandoned
    started_at: str
    finished_at: str | None = None
    wall_s: float | None = None
    budget_s: float | None = None
    max_turns: int | None = None
    exit_code: int | None = None  # negative: ended by that signal (at the budget: timed_out); None: not started
    timed_out: bool = False
    completed: bool = False  # the session reached its own end (the CLI's final event)
    sandbox: str = "none"
    sandbox_warning: str | None = None
    endpoints: list[str] = []  # what its sandbox let it reach (["*"]: the host's network)
    egress_refused: list[str] = []  # host:port it asked for and was refused
    cli_version: str | None = None
    command: list[str] = []  # as started, secrets redacted, the prompt as {prompt}
    env_passed: list[str] = []  # variable names only
    env_missing: list[str] = []
    run_shapes: str = "visible"
    graded_shapes: str = "all"
    checks: int = 0  # ./check calls
    benches: int = 0  # ./bench calls
    usage: Usage = Usage()
    visible: Grade | None = None
    graded: Grade | None = None
    transcript: str | None = None  # relative to the run folder
    folder: str = ""
    error: str | None = None
