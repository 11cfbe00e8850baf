"""`evaluate(problem, solution, settings) -> Verdict`: the engine's entry point.

The trusted side: it prepares the evaluation (device, shapes, the job the child will get), hands
it to the gate runner, and finishes the verdict (environment, summary, reward). Whatever happens
to the candidate (a report, a crash, silence) ends as a verdict; only rooftop's own bugs and a
cancellation raise.
"""

from __future__ import annotations

import secrets
import threading
import time

from rooftop.build.cache import cache_root
from rooftop.environment import parent_environment
from rooftop.errors import UserError
from rooftop.pipeline.job import EvalJob
from rooftop.pipeline.trusted.context import CallLog, Evaluation, RunState, Seeds
from rooftop.pipeline.trusted.runner import GateRunner
from rooftop.problem.spec import Problem, Shape, Split, cpu_refusal
from rooftop.solution.loader import Solution
from rooftop.verdict import ShapeResult, Status, Verdict
from rooftop.vocabulary import (
    SHAPE_GROUPS,
    DeviceChoice,
    DeviceType,
    EvaluationFinished,
    EvaluationStarted,
    EventSink,
    Settings,
    ignore,
)


def resolve_device(choice: str, what: str = "device") -> DeviceType:
    """The device type a choice (auto, cpu, cuda) runs on: auto is cuda when torch sees a GPU. cuda
    where torch sees none is the caller's mistake (`what` names the option or argument), said at
    once: jobs for a GPU would otherwise wait for a device worker that never comes."""
    chosen = DeviceChoice(choice)
    if chosen is DeviceChoice.cpu:
        return "cpu"
    import torch

    if chosen is DeviceChoice.cuda:
        if not torch.cuda.is_available():
            raise UserError(f"{what} cuda: no CUDA GPU is visible to torch on this machine")
        return "cuda"
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_settings(settings: Settings, names: dict[str, str] | None = None) -> DeviceType:
    """What the machine must have for these settings (a GPU for cuda or --graphs, bubblewrap for
    the bwrap sandbox), checked where settings are used, before anything is queued or started: the
    device type they run on. `names` maps a field to the option the caller's user set it with."""
    named = {"device": "device", "graphs": "graphs", **(names or {})}
    device = resolve_device(settings.device, named["device"])
    if settings.graphs and device == "cpu":
        raise UserError(f"{named['graphs']}: CUDA graphs need a GPU, and torch sees none here")
    if settings.sandbox == "bwrap":
        from rooftop.integrity.sandbox import require_bwrap

        require_bwrap()
    return device


def select_shapes(problem: Problem, choice: str, device: str) -> tuple[str, list[Shape]]:
    """A group (auto, visible, held_out, all, smoke) or comma-separated shape names."""
    spec = problem.spec
    if choice == "auto":
        if device == "cpu":
            why = cpu_refusal([problem])
            if why:
                raise UserError(why)
        choice = "smoke" if device == "cpu" and spec.smoke else "all"
    if choice not in SHAPE_GROUPS:
        return choice, _named_shapes(problem, choice)
    shapes = spec.select(choice)
    if not shapes:
        raise UserError(f"--shapes {choice}: problem '{problem.spec.name}' has no {choice} shapes")
    return choice, shapes


def _named_shapes(problem: Problem, choice: str) -> list[Shape]:
    by_name = {s.name: s for s in problem.spec.all_shapes()}
    names = [n.strip() for n in choice.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown or not names:
        raise UserError(f"--shapes {choice}: expected a group ({', '.join(SHAPE_GROUPS)}) or shape names of "
                        f"'{problem.name}' ({', '.join(by_name)}); unknown: {', '.join(unknown) or '(none given)'}")
    return [by_name[n] for n in dict.fromkeys(names)]


def evaluate(problem: Problem, solution: Solution, settings: Settings | None = None, *,
             events: EventSink | None = None, cancel: threading.Event | None = None) -> Verdict:
    """Judge one solution of one problem. `events` receives the runner's progress events; setting
    `cancel` stops the evaluation between two calls (it then raises `Cancelled`, recording nothing)."""
    settings = settings or Settings()
    started = time.monotonic()
    device = check_settings(settings)
    which, shapes = select_shapes(problem, settings.shapes, device)
    ev = prepare(problem, solution, settings, device, which, shapes, events or ignore, cancel)
    ev.state.emit(EvaluationStarted(problem=problem.name, solution=str(solution.path), device=device,
                                    shapes=[s.name for s in shapes]))
    try:
        GateRunner().run(ev)
    finally:
        ev.close()
    verdict = finish(ev, started)
    ev.state.emit(EvaluationFinished(status=verdict.status, reward=verdict.reward, seconds=verdict.wall_seconds))
    return verdict


def prepare(problem: Problem, solution: Solution, settings: Settings, device: DeviceType, which: str,
             shapes: list[Shape], events: EventSink, cancel: threading.Event | None) -> Evaluation:
    verdict = Verdict(status=Status.internal_error, reward=None, problem=problem.name,
                      problem_version=problem.spec.version, solution=str(solution.path),
                      baseline=problem.spec.baseline,
                      source_hash=solution.source_hash, languages=list(solution.languages),
                      shapes_selected=which, reward_fn=settings.reward_fn,
                      graphs=settings.graphs and device == "cuda", figures=problem.spec.figures)
    verdict.shapes = [ShapeResult(shape=s.name, split=s.split.value, params=s.params) for s in shapes]
    return Evaluation(problem=problem, solution=solution, settings=settings, verdict=verdict,
                      job=make_job(problem, solution, settings, device, shapes),
                      state=RunState(emit=events, cancel=cancel), calls=CallLog(seeds=Seeds(settings.seed)))


def make_job(problem: Problem, solution: Solution, settings: Settings, device: DeviceType,
             shapes: list[Shape]) -> EvalJob:
    """What the child is told. Held-out shapes the child does not run are not in its copy of the
    spec: a visible-shapes evaluation leaks none of them (a problem needs at least one shape, so
    one without visible shapes keeps its list on smoke runs)."""
    weights_seed = settings.seed if settings.seed is not None else secrets.randbits(31)
    names = {s.name for s in shapes}
    kept = [s for s in problem.spec.shapes if s.split is not Split.held_out or s.name in names]
    seen = problem.model_copy(update={"spec": problem.spec.model_copy(update={"shapes": kept or problem.spec.shapes})})
    return EvalJob(problem=seen, solution=solution, device=device, shapes=shapes, weights_seed=weights_seed,
                   cache_root=cache_root(), build_timeout=settings.build_timeout, traced=settings.checks)


def finish(ev: Evaluation, started: float) -> Verdict:
    from rooftop.score.reward import compute_reward

    verdict = ev.verdict
    if verdict.environment is None:
        verdict.environment = parent_environment(ev.device, ev.solution, ran=ev.setup.child is not None)
    if ev.setup.child is None:
        verdict.sandbox = "not started"  # refused before any child ran: no sandbox was needed
    verdict.wall_seconds = time.monotonic() - started
    verdict.phases = {k: round(v, 4) for k, v in ev.phases.items()}
    if ev.setup.reference is not None and ev.calls.inputs_checked:
        where = f"made by get_inputs on another device and copied to {ev.device}" \
            if ev.setup.reference.instance.moved_inputs else f"made on {ev.device}"
        verdict.inputs = (f"{where} by both sides from each call's seed; bit-identical at the sampled positions "
                          f"of all {ev.calls.inputs_checked} checked calls")
    verdict.traced_calls = ev.trace.calls
    if verdict.summary.shapes == 0:
        verdict.summary.shapes = len(verdict.shapes)
        verdict.summary.correct_shapes = sum(1 for r in verdict.shapes if r.correct)
    verdict.reward = compute_reward(verdict, ev.settings.reward_fn)
    return verdict
