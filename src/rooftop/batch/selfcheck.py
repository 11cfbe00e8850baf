"""Each problem's reference evaluated as its own candidate: the check that a deck (an imported one
above all) is sound before any solution is judged by it.

The candidate is the reference's source with `ModelNew = Model` added. It must come out
`correct`, and on a GPU its speedup over eager must be 1.0 within its 95 % interval on every
timed shape: anything else means the problem cannot be judged as written (a reference that is
not deterministic, inputs the evaluation cannot make, a timing that favours one side). On a CPU,
or where no interval was measured (too few samples for one, or a shape timed on a shared
machine), the row says that the speedup was not checked, and why. The problem's
own policy is lifted for this check: it says what candidates may not call, and the reference
calls exactly that.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from rooftop.batch import Progress, Quiet
from rooftop.errors import on_one_line
from rooftop.pipeline.evaluate import resolve_device
from rooftop.problem.spec import Policy, Problem
from rooftop.service.evaluator import Result
from rooftop.service.inputs import Submission
from rooftop.service.jobs import SourceSnapshot
from rooftop.service.many import run_many
from rooftop.service.worker import BUG
from rooftop.solution.loader import load_solution
from rooftop.store.db import Store
from rooftop.verdict import UNTRUSTED_TIMING, ShapeResult, Status, Verdict
from rooftop.vocabulary import Settings


class ShapeSpeedup(BaseModel):
    shape: str
    speedup: float | None = None
    low: float | None = None  # the speedup's 95 % interval (None: too few samples for one)
    high: float | None = None
    flags: list[str] = []
    note: str = ""  # why the speedup is not a measurement, or has no interval
    queued: dict[str, float] = {}  # per side, the median host seconds to queue a timed call (GPU)

    @property
    def measured(self) -> bool:
        """Whether the shape has an interval to judge: one taken on a machine of its own."""
        return self.low is not None and self.high is not None and not UNTRUSTED_TIMING.keys() & set(self.flags)


class SelfCheckRow(BaseModel):
    problem: str
    # the verdict's status; when none was made: `problem_error` (the problem's own code does not
    # fit its shapes) or `error` (rooftop failed: a bug)
    status: str
    passed: bool
    interval_checked: bool  # false on a CPU, or where no shape's interval was measured
    reason: str = ""
    speedup: float | None = None  # geometric mean over the trusted timed shapes (`shapes` notes the others)
    shapes: list[ShapeSpeedup] = []


def selfcheck(problems: list[Problem], settings: Settings, store: Store | None = None,
              progress: Progress | None = None, tolerance: float = 0.0,
              on_row: Callable[[SelfCheckRow], None] | None = None) -> list[SelfCheckRow]:
    """One row per problem, in order (`on_row` sees each as it is made). With `tolerance` t an
    interval passes when it reaches [1 - t, 1 + t] rather than 1.0 itself: GPU intervals are often
    a few hundredths of a percent wide, so a bias of a fraction of a percent fails the strict check.

    The evaluations go through `run_many`'s inline backend, judged afresh every time: on a GPU the
    next problems' children are started while the current one is evaluated (their interpreters and
    torch imports are CPU work, beside a GPU timing), so a deck does not pay each child's start-up
    in turn. The relaxed problems reach the evaluations as they are in memory (the inline backend
    takes the submissions' problems by their hash), with no folder written for them."""
    progress = progress or Quiet()
    device = resolve_device(settings.device)
    rows: list[SelfCheckRow | None] = [None] * len(problems)

    def finished(index: int, result: Result) -> None:
        rows[index] = row = result_row(problems[index].name, result, device, tolerance)
        if on_row is not None:
            on_row(row)
        progress.advance()

    with tempfile.TemporaryDirectory(prefix="rooftop-selfcheck-") as folder:
        solutions = [load_solution(self_solution(p, Path(folder) / str(i))) for i, p in enumerate(problems)]
        submissions = [Submission(problem=relaxed(p), source=SourceSnapshot.of(s), label=str(s.path))
                       for p, s in zip(problems, solutions, strict=True)]
        run_many(submissions, settings, store=store, again=True,
                 on_start=lambda index: progress.start(problems[index].name), on_result=finished)
    return [row for row in rows if row is not None]


def result_row(name: str, result: Result, device: str, tolerance: float = 0.0) -> SelfCheckRow:
    """The row of a self-check's result: its verdict judged, or why none was made."""
    if result.verdict is not None:
        return judge(name, result.verdict, device, tolerance)
    status, reason = failure_of(result.error or "")
    return SelfCheckRow(problem=name, status=status, passed=False, interval_checked=False, reason=reason)


def failure_of(error: str, limit: int = 300) -> tuple[str, str]:
    """A job's error as a row's status and reason: `error` when rooftop itself failed (a bug to
    report: its first line, no traceback), else `problem_error` (the problem's own code does not
    fit its shapes, or the settings do not fit it)."""
    if error.startswith(BUG):
        return "error", on_one_line(error.removeprefix(BUG).split("\n")[0], limit)
    return "problem_error", on_one_line(error, limit)


def self_solution(problem: Problem, folder: Path) -> Path:
    """A solution file holding the reference as the candidate."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "solution.py"
    path.write_text(problem.reference.read_text().rstrip("\n") + "\n\n\nModelNew = Model\n")
    return path


def relaxed(problem: Problem) -> Problem:
    """The problem with no policy of its own (the global rules of the static gate still apply), but
    with the imports it allows: the reference may need them (an imported problem's einops)."""
    policy = Policy(extra_imports=problem.spec.policy.extra_imports)
    return problem.model_copy(update={"spec": problem.spec.model_copy(update={"policy": policy})})


def shape_note(row: ShapeResult) -> str:
    if row.untrusted:
        return f"not measured: {row.untrusted}; ignored by the reward"
    return row.no_interval or ""


def judge(name: str, verdict: Verdict, device: str, tolerance: float = 0.0) -> SelfCheckRow:
    """The row of one verdict: an interval passes or fails only where it was measured; a missing
    one (too few samples, a shared machine) leaves the row unchecked, with the shapes' notes."""
    shapes = [ShapeSpeedup(shape=r.shape, speedup=r.speedup, low=r.speedup_low, high=r.speedup_high, flags=r.flags,
                           note=shape_note(r), queued=r.queue_seconds)
              for r in verdict.shapes if r.candidate is not None]
    row = SelfCheckRow(problem=name, status=verdict.status.value, passed=False, interval_checked=False,
                       speedup=verdict.summary.geomean_speedup, shapes=shapes)
    if verdict.status is not Status.correct:
        first = verdict.messages[0] if verdict.messages else f"the verdict is {verdict.status.value}"
        row.reason = " ".join(first.split())[:300]
        return row
    row.passed = True
    measured = [s for s in shapes if s.measured]
    notes = "; ".join(f"shape '{s.shape}': {s.note}" for s in shapes if s.note)
    if device != "cuda":
        row.reason = "; ".join(filter(None, ["correct; on a CPU the speedup interval is not checked", notes]))
        return row
    if not measured:
        row.reason = "; ".join(filter(None, ["correct; no speedup interval was measured"
                                             + (" (timing was off)" if not shapes else ""), notes]))
        return row
    row.interval_checked = True
    outside = [s for s in measured if s.low is not None and s.high is not None
               and not (s.low <= 1.0 + tolerance and s.high >= 1.0 - tolerance)]
    if outside:
        row.passed = False
        target = f"1.0 ± {tolerance:.3g}" if tolerance else "1.0"
        row.reason = "; ".join(f"shape '{s.shape}': speedup {s.speedup or 0:.3f}x, 95 % interval "
                               f"[{s.low:.3f}, {s.high:.3f}] excludes {target}" for s in outside)
    elif len(measured) < len(shapes):
        row.reason = notes or f"no interval on {', '.join(s.shape for s in shapes if s not in measured)}"
    flagged = sorted({f for s in shapes for f in s.flags})
    if flagged:
        row.reason = "; ".join(filter(None, [row.reason, f"timing flagged: {', '.join(flagged)}"]))
    return row
