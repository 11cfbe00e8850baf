"""A run of KernelBench generations scored with rooftop's own measurements.

A run folder holds generations named `level_{L}_problem_{P}_sample_{S}_kernel.py`; problem P of
level L is the KernelBench file whose name starts with `P_`. Every generation is evaluated with
`run_evaluation` against that problem (as `rooftop import kernelbench` would write it, in a
temporary folder) and the verdicts become KernelBench's figures (score/kernelbench_metrics.py):
a sample's speedup is the eager reference's time over its own, both measured in the same
evaluation (the verdict's geometric mean over its trusted shapes).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from rooftop.api import run_evaluation
from rooftop.batch import Progress, Quiet
from rooftop.batch.selfcheck import failure_status, one_line
from rooftop.errors import UserError
from rooftop.pipeline.evaluate import resolve_device
from rooftop.pipeline.trusted.spawn import prestart
from rooftop.problem.formats.kernelbench import SourceFile, read_sources, write_problem
from rooftop.problem.imports import Skipped
from rooftop.problem.loader import load_problem
from rooftop.problem.spec import Problem
from rooftop.score.kernelbench_metrics import SampleOutcome, summarize
from rooftop.score.reward import unmeasured
from rooftop.solution.loader import load_solution
from rooftop.store.db import Store
from rooftop.verdict import Gate, Status, Verdict
from rooftop.vocabulary import Settings

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
    progress = progress or Quiet()
    generations = find_generations(Path(run_dir))
    sources, _ = read_sources(Path(kernelbench))
    by_id = {(s.level, s.problem_id): s for s in sources}
    rows: list[SampleRow] = []
    with tempfile.TemporaryDirectory(prefix="rooftop-kernelbench-") as tmp:
        problems: dict[tuple[int, int], Problem | str] = {}
        for gen in generations:
            key = (gen.level, gen.problem_id)
            if key not in problems:
                problems[key] = _problem(by_id.get(key), gen, Path(tmp))
        work = [(gen, problems[(gen.level, gen.problem_id)]) for gen in generations]
        ahead = resolve_device(settings.device) == "cuda"  # on a CPU a starting child would share the timing's cores
        for i, (gen, problem) in enumerate(work):
            if ahead and i + 1 < len(work):
                _start_ahead(*work[i + 1], settings)
            rows.append(_evaluate(gen, problem, settings, store, progress))
            if on_row is not None:
                on_row(rows[-1])
            progress.advance()
    outcomes = [SampleOutcome(problem=(r.level, r.problem_id), compiled=r.compiled, correct=r.correct,
                              speedup=r.speedup) for r in rows]
    return {**summarize(outcomes), "samples": [r.model_dump(mode="json") for r in rows]}


def _start_ahead(gen: Generation, problem: Problem | str, settings: Settings) -> None:
    """The next generation's child, started while this one is judged (its interpreter and torch
    come up beside the GPU work); a generation that cannot be loaded gets none."""
    if isinstance(problem, str):
        return
    try:
        prestart(problem, load_solution(gen.path), "cuda", settings.sandbox)
    except UserError:
        pass


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


def _evaluate(gen: Generation, problem: Problem | str, settings: Settings, store: Store | None,
              progress: Progress) -> SampleRow:
    if isinstance(problem, str):
        progress.start(gen.path.name)
        return _row(gen, status="unknown_problem", compiled=False, correct=False, reason=problem)
    events = progress.start(f"{problem.name} sample {gen.sample}")
    try:
        solution = load_solution(gen.path)
    except UserError as exc:
        return _row(gen, problem=problem.name, status="input_error", compiled=False, correct=False,
                         reason=str(exc))
    try:
        verdict = run_evaluation(problem, solution, settings, store=store, events=events)
    except Exception as exc:  # recorded with its cause (the problem's own code, or a bug of rooftop's)
        return _row(gen, problem=problem.name, status=failure_status(exc), compiled=False, correct=False,
                    reason=one_line(exc))
    correct = verdict.status is Status.correct
    missed = unmeasured(verdict)  # a speedup the reward counts as 0x is no sample's fast_p either
    speedup = verdict.summary.geomean_speedup if correct and not missed else None
    reason = "" if correct else " ".join((verdict.messages[0] if verdict.messages else verdict.status.value).split())
    if correct and speedup is None:
        whys = sorted(set(missed.values()))
        reason = f"no trusted timing ({', '.join(whys)})" if whys else "not timed"
    return _row(gen, problem=problem.name, status=verdict.status.value, compiled=compiled(verdict),
                     correct=correct, speedup=speedup, reason=reason[:300])
