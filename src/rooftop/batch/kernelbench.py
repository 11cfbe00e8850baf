"""A run of KernelBench generations scored with rooftop's own measurements.

A run folder holds generations named `level_{L}_problem_{P}_sample_{S}_kernel.py`; problem P of
level L is the KernelBench file whose name starts with `P_`. Every generation is evaluated with
`run_many`'s inline backend against that problem (as `rooftop import kernelbench` would write it,
in a temporary folder) and the verdicts become KernelBench's figures (score/kernelbench_metrics.py):
a sample's speedup is the eager reference's time over its own, both measured in the same
evaluation (the verdict's geometric mean over its trusted shapes).
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from rooftop.batch import Progress, Quiet
from rooftop.batch.selfcheck import failure_of
from rooftop.errors import UserError
from rooftop.pipeline.evaluate import resolve_device
from rooftop.pipeline.trusted.spawn import prestart
from rooftop.problem.formats.kernelbench import SourceFile, read_sources, write_problem
from rooftop.problem.imports import Skipped
from rooftop.problem.loader import load_problem
from rooftop.problem.spec import Problem
from rooftop.score.kernelbench_metrics import SampleOutcome, summarize
from rooftop.score.reward import unmeasured
from rooftop.service.evaluator import Result
from rooftop.service.inputs import Submission
from rooftop.service.jobs import SourceSnapshot
from rooftop.service.many import run_many
from rooftop.solution.loader import Solution, load_solution
from rooftop.store.db import Store
from rooftop.verdict import Gate, Status, Verdict
from rooftop.vocabulary import EventSink, Settings

GENERATION = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


@dataclass(frozen=True)
class Generation:
    path: Path
    level: int
    problem_id: int
    sample: int


class SampleRow(BaseModel):
    file: str
    level: int
    problem_id: int
    sample: int
    problem: str | None = None  # kernelbench/level{L}/{stem}; None when no such problem exists
    # the verdict's status; when none was made: `unknown_problem` (no such KernelBench file, or one
    # that is not a problem), `problem_error` (its reference does not fit its shape), `input_error`
    # (the generation file cannot be read as a solution) or `error` (rooftop failed: a bug)
    status: str
    compiled: bool
    correct: bool
    speedup: float | None = None
    reason: str = ""


def compiled(verdict: Verdict) -> bool:
    """Whether a generation compiled: False when its verdict is `compile_error` (a syntax error at
    the static gate; nvcc, load_inline or Triton failing, or an exception while the file was
    imported, at the build gate) or when the build gate ran out of time. Everything else compiled,
    including a file the static policy rejected, a ModelNew that fails to construct (init_error)
    and CUDA code that compiled on a machine without a GPU (needs_gpu)."""
    if verdict.status is Status.compile_error:
        return False
    return not (verdict.status is Status.timeout and verdict.failed_gate is Gate.build)


def find_generations(run_dir: Path) -> list[Generation]:
    if not run_dir.is_dir():
        raise UserError(f"RUN_DIR {run_dir}: not a folder")
    found = [Generation(p, int(m.group(1)), int(m.group(2)), int(m.group(3)))
             for p in run_dir.iterdir() if p.is_file() and (m := GENERATION.match(p.name))]
    if not found:
        raise UserError(f"RUN_DIR {run_dir}: no generation files here "
                        "(named level_{L}_problem_{P}_sample_{S}_kernel.py)")
    return sorted(found, key=lambda g: (g.level, g.problem_id, g.sample))


def run_batch(run_dir: Path, kernelbench: Path, settings: Settings, store: Store | None = None,
              progress: Progress | None = None,
              on_row: Callable[[SampleRow], None] | None = None) -> dict[str, object]:
    """KernelBench's figures over every generation of `run_dir`, and one row per generation
    (`on_row` sees each as it is made)."""
    generations = find_generations(Path(run_dir))
    sources, _ = read_sources(Path(kernelbench))
    by_id = {(s.level, s.problem_id): s for s in sources}
    with tempfile.TemporaryDirectory(prefix="rooftop-kernelbench-") as tmp:
        problems: dict[tuple[int, int], Problem | str] = {}
        for gen in generations:
            key = (gen.level, gen.problem_id)
            if key not in problems:
                problems[key] = _problem(by_id.get(key), gen, Path(tmp))
        work = [(gen, problems[(gen.level, gen.problem_id)]) for gen in generations]
        rows = _judge(work, settings, store, RowFeed(len(work), progress or Quiet(), on_row))
    outcomes = [SampleOutcome(problem=(r.level, r.problem_id), compiled=r.compiled, correct=r.correct,
                              speedup=r.speedup) for r in rows]
    return {**summarize(outcomes), "samples": [r.model_dump(mode="json") for r in rows]}


class RowFeed:
    """The rows of a run, told to `on_row` in the generations' order as they are made: a row made
    without an evaluation (no such problem, an unreadable file) waits for the evaluations before it."""

    def __init__(self, total: int, progress: Progress, on_row: Callable[[SampleRow], None] | None) -> None:
        self.progress, self.on_row = progress, on_row
        self.rows: list[SampleRow | None] = [None] * total
        self.labels: dict[int, str] = {}  # rows made without an evaluation: the label they are shown by
        self._told = 0

    def put(self, index: int, row: SampleRow, label: str | None = None) -> None:
        self.rows[index] = row
        if label is not None:
            self.labels[index] = label
        while self._told < len(self.rows) and (ready := self.rows[self._told]) is not None:
            if self._told in self.labels:
                self.progress.start(self.labels[self._told])
            if self.on_row is not None:
                self.on_row(ready)
            self.progress.advance()
            self._told += 1


def _judge(work: list[tuple[Generation, Problem | str]], settings: Settings, store: Store | None,
           feed: RowFeed) -> list[SampleRow]:
    """Every generation's row: those with a problem and a readable file evaluated through
    `run_many`'s inline backend (afresh every time); on a GPU each next generation's child is
    started while the one before is judged (its interpreter and torch come up beside the GPU work;
    on a CPU a starting child would share the timing's cores)."""
    submissions: list[Submission] = []
    evaluated: list[tuple[int, Generation, Problem, Solution]] = []  # per submission
    for index, (gen, problem) in enumerate(work):
        if isinstance(problem, str):
            feed.put(index, _row(gen, status="unknown_problem", compiled=False, correct=False, reason=problem),
                     gen.path.name)
            continue
        try:
            solution = load_solution(gen.path)
        except UserError as exc:
            feed.put(index, _row(gen, problem=problem.name, status="input_error", compiled=False, correct=False,
                                 reason=str(exc)), f"{problem.name} sample {gen.sample}")
            continue
        submissions.append(Submission(problem=problem, source=SourceSnapshot.of(solution), label=str(solution.path)))
        evaluated.append((index, gen, problem, solution))
    ahead = resolve_device(settings.device) == "cuda"

    def start(number: int) -> EventSink:
        if ahead and number + 1 < len(evaluated):
            _, _, problem, solution = evaluated[number + 1]
            with contextlib.suppress(UserError):  # its own evaluation says what is wrong with it
                prestart(problem, solution, "cuda", settings.sandbox)
        _, gen, problem, _ = evaluated[number]
        return feed.progress.start(f"{problem.name} sample {gen.sample}")

    def finished(number: int, result: Result) -> None:
        index, gen, problem, _ = evaluated[number]
        feed.put(index, _result_row(gen, problem.name, result))

    if submissions:
        run_many(submissions, settings, store=store, again=True, ahead=False, on_start=start, on_result=finished)
    return [row for row in feed.rows if row is not None]


def _problem(source: SourceFile | None, gen: Generation, tmp: Path) -> Problem | str:
    """The problem a generation names, or why there is none."""
    if source is None:
        return f"no problem {gen.problem_id} in level {gen.level} of the KernelBench files"
    written = write_problem(source, tmp / source.name)
    if isinstance(written, Skipped):
        return f"{source.origin}: {written.reason}"
    try:
        return load_problem(written.folder, bundled_name=source.name)
    except UserError as exc:
        return str(exc)


def _row(gen: Generation, *, status: str, compiled: bool, correct: bool, reason: str = "",
         problem: str | None = None, speedup: float | None = None) -> SampleRow:
    return SampleRow(file=gen.path.name, level=gen.level, problem_id=gen.problem_id, sample=gen.sample,
                     problem=problem, status=status, compiled=compiled, correct=correct, speedup=speedup,
                     reason=reason)


def _result_row(gen: Generation, name: str, result: Result) -> SampleRow:
    if result.verdict is None:
        status, reason = failure_of(result.error or "")
        return _row(gen, problem=name, status=status, compiled=False, correct=False, reason=reason)
    verdict = result.verdict
    correct = verdict.status is Status.correct
    missed = unmeasured(verdict)  # a speedup the reward counts as 0x is no sample's fast_p either
    speedup = verdict.summary.geomean_speedup if correct and not missed else None
    reason = "" if correct else " ".join((verdict.messages[0] if verdict.messages else verdict.status.value).split())
    if correct and speedup is None:
        whys = sorted(set(missed.values()))
        reason = f"no trusted timing ({', '.join(whys)})" if whys else "not timed"
    return _row(gen, problem=name, status=verdict.status.value, compiled=compiled(verdict),
                correct=correct, speedup=speedup, reason=reason[:300])
