"""rooftop decks as inspect_ai tasks: a model answers each problem's prompt with one solution file,
which is graded like any other candidate, held-out shapes included.

    inspect eval rooftop/hard --model openai/gpt-4o
    inspect eval rooftop/rooftop -T deck=examples -T problems=softmax,gemm -T device=cuda

A sample shows the shapes an agent may see (visible ones; a problem's smoke shapes on a CPU);
the scorer grades the last ```python block of the answer on the graded group through the
evaluation service, so every verdict lands in the results database next to the CLI's. What the
score explains is the agent's view of the graded verdict: counts only for held-out shapes.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rooftop.errors import UserError

try:
    from inspect_ai import Task, task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageUser
    from inspect_ai.scorer import Score, Scorer, Target, accuracy, mean, scorer, stderr
    from inspect_ai.solver import Generate, Solver, TaskState, generate, solver
except ImportError as exc:
    raise UserError("the inspect_ai integration needs inspect-ai: pip install 'rooftop[inspect]'") from exc

from rooftop.agents.reply import extract_code, reply_task
from rooftop.env.core import shape_groups
from rooftop.env.view import agent_view, render
from rooftop.problem.registry import bundled_names, resolve
from rooftop.problem.spec import Problem
from rooftop.service.evaluator import Evaluator, Result
from rooftop.service.jobs import MAX_SOURCE_BYTES, SourceSnapshot
from rooftop.verdict import Status, Verdict
from rooftop.vocabulary import DeviceChoice, DeviceType, Settings

ANSWER = """\
## Answer

Reply with one complete Python file defining `ModelNew` (imports included) in a single
```python block. Only the last ```python block of your reply is evaluated{more}.
"""
MORE = ", on these shapes and on more that you have not seen, so write it for any shape"

FEEDBACK = """\
Your kernel was evaluated on the shapes above:

{view}

Reply with the complete file again, improved or fixed, in a ```python block: your last answer is the one graded.
"""

_EVALUATORS: dict[tuple[Path, DeviceType], Evaluator] = {}
_LOCK = threading.Lock()


# -- the dataset ---------------------------------------------------------------------------------
def problem_sample(problem: Problem, device: DeviceType) -> Sample:
    """One problem as a sample: its prompt on the shapes it may see, and the groups it is run on."""
    run_shapes, graded_shapes = shape_groups(problem, device)
    # the environment's tool section describes an episode; an inspect sample is answered in one reply
    answer = ANSWER.format(more=MORE if graded_shapes != run_shapes else "")
    prompt = reply_task(problem, run_shapes).rstrip() + "\n\n" + answer
    return Sample(input=prompt, id=problem.name,
                  metadata={"problem": problem.name, "run_shapes": run_shapes, "graded_shapes": graded_shapes})


def rooftop_dataset(deck: str | None = "hard", problems: Sequence[str] | None = None,
                    device: str = "auto") -> MemoryDataset:
    """A deck's problems, or the named ones (names within the deck, deck names or paths)."""
    resolved = _problems(deck, problems)
    kind = _device(device)
    return MemoryDataset([problem_sample(p, kind) for p in resolved], name=deck or "rooftop")


def _problems(deck: str | None, problems: Sequence[str] | None) -> list[Problem]:
    if problems:
        in_deck = set(bundled_names(deck)) if deck else set()
        return [resolve(f"{deck}/{n}" if f"{deck}/{n}" in in_deck else n) for n in problems]
    if deck is None:
        raise UserError("rooftop dataset: give a deck or a list of problems")
    names = bundled_names(deck)
    if not names:
        raise UserError(f"deck '{deck}': no problems in it")
    return [resolve(n) for n in names]


def _device(device: str) -> DeviceType:
    from rooftop.pipeline.evaluate import resolve_device

    try:
        return resolve_device(device)
    except ValueError:
        raise UserError(f"device: expected auto, cpu or cuda, got '{device}'")


# -- the evaluation service, one per results database and device in a process -------------------
def shared_evaluator(db: str | Path, device: DeviceType) -> Evaluator:
    """The running evaluator of (db, device): every scorer call of a process queues on it, so its
    workers start once and stay warm."""
    key = (Path(db).resolve(), device)
    with _LOCK:
        if key not in _EVALUATORS:
            if not _EVALUATORS:
                atexit.register(close_evaluators)
            _EVALUATORS[key] = Evaluator(key[0], device).start()
        return _EVALUATORS[key]


def close_evaluators() -> None:
    """Stop the shared evaluators (at exit; jobs under way go back to the queue)."""
    with _LOCK:
        running = list(_EVALUATORS.values())
        _EVALUATORS.clear()
    for evaluator in running:
        evaluator.close()


# -- answers and verdicts ------------------------------------------------------------------------
async def evaluate_code(code: str, problem: Problem, shapes: str, db: str | Path, device: DeviceType,
                        label: str | None = None) -> Result:
    """A solution file's verdict on a group of shapes, through the shared evaluator."""
    evaluator = shared_evaluator(db, device)
    settings = Settings(device=DeviceChoice(device), shapes=shapes)
    job = evaluator.submit(problem, SourceSnapshot.from_code(code), settings, label=label)
    return await evaluator.wait_async(job)


def verdict_values(verdict: Verdict | None) -> dict[str, float]:
    """The score of a verdict: correctness, then the summary's geometric means, 0 where none."""
    if verdict is None or verdict.status is not Status.correct:
        return {"correct": 0.0, "speedup": 0.0, "roofline": 0.0}
    from rooftop.score.reward import reward_speedup

    # an unmeasured speedup (a shape timed on a shared machine) counts 0, as in the rewards
    return {"correct": 1.0, "speedup": reward_speedup(verdict) or 0.0,
            "roofline": verdict.summary.geomean_roofline or 0.0}


def _unanswered(why: str, answer: str = "") -> Score:
    return Score(value=verdict_values(None), answer=answer, explanation=why, metadata={"status": "no_answer"})


def _refused(code: str) -> str | None:
    size = len(code.encode())
    return f"the code is {size} bytes; at most {MAX_SOURCE_BYTES} are accepted" if size > MAX_SOURCE_BYTES else None


@scorer(metrics={"correct": [accuracy(), stderr()], "speedup": [mean(), stderr()],
                 "roofline": [mean(), stderr()]})
def rooftop_scorer(db: str = "rooftop.db", device: str = "auto") -> Scorer:
    """Grades the answer's last ```python block on the sample's graded shapes (held-out included)."""
    kind = _device(device)

    async def score(state: TaskState, target: Target) -> Score:
        code = extract_code(state.output.completion)
        if code is None:
            return _unanswered("no ```python block in the answer: nothing to evaluate")
        if (why := _refused(code)) is not None:
            return _unanswered(why, code)
        problem = resolve(state.metadata["problem"])
        result = await evaluate_code(code, problem, state.metadata["graded_shapes"], db, kind,
                                     label=f"inspect:{state.sample_id}")
        verdict = result.verdict
        if verdict is None:
            explanation = f"no verdict: {result.error or 'the evaluation failed'}"
        else:
            explanation = render(agent_view(verdict, verdict.reward or 0.0, graded=True))
        metadata: dict[str, Any] = {
            "status": verdict.status.value if verdict else "internal_error", "job": result.job.id,
            "summary": verdict.summary.model_dump(mode="json") if verdict else None}
        return Score(value=verdict_values(verdict), answer=code, explanation=explanation, metadata=metadata)

    return score


# -- solvers -------------------------------------------------------------------------------------
@solver
def refine(attempts: int = 2, db: str = "rooftop.db", device: str = "auto") -> Solver:
    """Answer, then up to `attempts - 1` times: evaluate the answer on the shapes the model may see
    and show it what an agent sees of the verdict, for a better answer."""
    kind = _device(device)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state = await generate(state)
        for _ in range(attempts - 1):
            code = extract_code(state.output.completion)
            if code is None:
                view = "there is no ```python block in your answer"
            elif (why := _refused(code)) is not None:
                view = why
            else:
                result = await evaluate_code(code, resolve(state.metadata["problem"]), state.metadata["run_shapes"],
                                             db, kind, label=f"inspect:{state.sample_id}:attempt")
                verdict = result.verdict
                view = render(agent_view(verdict, verdict.reward or 0.0)) if verdict else \
                    f"no verdict: {result.error or 'the evaluation failed'}"
            state.messages.append(ChatMessageUser(content=FEEDBACK.format(view=view)))
            state = await generate(state)
        return state

    return solve


# -- tasks ---------------------------------------------------------------------------------------
def rooftop_task(deck: str | None = "hard", problems: Sequence[str] | None = None, device: str = "auto",
                 db: str = "rooftop.db", attempts: int = 1) -> Task:
    """A deck (or named problems) as a task: the prompt, a model's answer, its graded verdict."""
    if attempts < 1:
        raise UserError(f"attempts: expected at least 1, got {attempts}")
    plan = generate() if attempts == 1 else refine(attempts, db, device)
    return Task(dataset=rooftop_dataset(deck, problems, device), solver=plan,
                scorer=rooftop_scorer(db, device))


@task
def rooftop(deck: str = "hard", problems: str | None = None, device: str = "auto", db: str = "rooftop.db",
            attempts: int = 1) -> Task:
    """Any deck; `problems` is a comma-separated list of names in it (or other problems' names or paths)."""
    names = [n.strip() for n in problems.split(",") if n.strip()] if problems else None
    return rooftop_task(deck, names, device, db, attempts)


@task(name="examples")
def rooftop_examples(device: str = "auto", db: str = "rooftop.db", attempts: int = 1) -> Task:
    """The bundled examples deck: small, classic kernels."""
    return rooftop_task("examples", None, device, db, attempts)


@task(name="hard")
def rooftop_hard(device: str = "auto", db: str = "rooftop.db", attempts: int = 1) -> Task:
    """The bundled hard deck."""
    return rooftop_task("hard", None, device, db, attempts)
