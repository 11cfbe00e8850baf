"""`KernelEnv`: a kernel-writing episode, gymnasium-style, over the evaluation service.

    env = KernelEnv(db="rooftop.db", device="cuda", reward="kevin", max_turns=4)
    prompt, info = env.reset("examples/softmax")
    text, reward, terminated, truncated, info = env.step({"tool": "run_kernel", "code": source})
    text, reward, terminated, truncated, info = env.step({"tool": "finish"})

The observation is text: the prompt, then each tool's result. `run_kernel` evaluates the code on
the shapes the agent may see (visible ones; smoke ones on a CPU when the problem has them) and
its reward is that verdict's. The episode keeps the best kernel so far (by that reward, the
first of equals); `finish` grades it on every shape, held-out ones included, and its reward is
the graded verdict's. Reaching the turn limit with `run_kernel` ends the episode as truncated and
grades the best kernel too (`info["final_reward"]`). The reward function is a name from
`rooftop.score.reward` (`default`: speedup - 1 and OpenReward penalties; `kevin`: 0.3·correct +
min(speedup, 10); a speedup not measured, on a shared machine, counts as 0x and the observation
says so) or any callable taking a verdict.

Every evaluation is a job in the store, named by its code and settings: the same code submitted
again is the same job, and an `Episode` (a plain document) is all an episode's state, so the
HTTP server keeps episodes in the store and carries them across its restarts. `AsyncKernelEnv`
is the same episode for trainers that run many at once on one event loop.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, Field

from rooftop.env.prompt import task_prompt
from rooftop.env.view import agent_view, render
from rooftop.errors import UserError
from rooftop.problem.registry import resolve
from rooftop.problem.spec import Problem
from rooftop.score.reward import REWARDS, compute_reward
from rooftop.service.evaluator import Evaluator, Result
from rooftop.service.jobs import MAX_SOURCE_BYTES, SourceSnapshot, problem_hash
from rooftop.verdict import Status, Verdict
from rooftop.vocabulary import DeviceChoice, DeviceType, Settings

RewardFn = Callable[[Verdict], "float | None"]
DEFAULT_TURNS = 8


class EpisodeOver(UserError):
    """A step after the episode ended."""


class ToolCall(BaseModel):
    """An action: `run_kernel` with the code of a solution file, or `finish`."""

    tool: Literal["run_kernel", "finish"]
    code: str | None = Field(default=None, description="run_kernel: a Python file defining ModelNew")


class Turn(BaseModel):
    tool: str
    job: str | None = None
    status: Status | None = None
    reward: float = 0.0


class Episode(BaseModel):
    """Everything an episode is: what the store keeps between a server's calls."""

    id: str = Field(default_factory=lambda: secrets.token_hex(12))
    task: str
    problem_hash: str
    reward_fn: str = "default"
    max_turns: int = DEFAULT_TURNS
    run_shapes: str = "visible"
    graded_shapes: str = "all"
    turns: list[Turn] = []
    best_job: str | None = None
    best_source: str | None = None
    best_reward: float | None = None
    graded_job: str | None = None
    final_reward: float | None = None
    terminated: bool = False
    truncated: bool = False
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def runs(self) -> int:
        return sum(t.tool == "run_kernel" for t in self.turns)


class StepResult(BaseModel):
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = {}

    def as_tuple(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.observation, self.reward, self.terminated, self.truncated, self.info


def shape_groups(problem: Problem, device: DeviceType) -> tuple[str, str]:
    """The shapes of `run_kernel` and of the grading: visible, then all; on a CPU a problem's
    smoke shapes for both where it has them (its real shapes would take minutes there)."""
    if device == "cpu" and problem.spec.smoke:
        return "smoke", "smoke"
    return "visible", "all"


class _Plan(BaseModel):
    call: ToolCall
    job: str | None = None  # the evaluation to wait for
    graded: bool = False
    refused: str | None = None  # the code was refused before any evaluation


class _EpisodeRules:
    """The episode's logic, apart from how its evaluations are waited for."""

    def __init__(self, evaluator: Evaluator | None = None, *, db: str | Path | None = None, device: str = "auto",
                 reward: str | RewardFn = "default", max_turns: int = DEFAULT_TURNS,
                 settings: Settings | None = None) -> None:
        if isinstance(reward, str) and reward not in REWARDS:
            raise UserError(f"reward: unknown reward function '{reward}' (known: {', '.join(REWARDS.names())})")
        if max_turns < 1:
            raise UserError(f"max_turns: expected at least 1, got {max_turns}")
        from rooftop.integrity.sandbox import require_isolation

        require_isolation((settings or Settings()).sandbox, "the environment", "settings.sandbox")
        if evaluator is None:
            from rooftop.pipeline.evaluate import resolve_device

            if db is None:
                raise UserError("KernelEnv: give an evaluator or a results database (db=...)")
            evaluator = Evaluator(db, resolve_device(device)).start()
            self._owned = True
        else:
            self._owned = False
        self.evaluator = evaluator
        self.reward = reward
        self.max_turns = max_turns
        self.settings = (settings or Settings()).model_copy(update={"device": DeviceChoice(evaluator.device)})
        self.episode: Episode | None = None
        self.problem: Problem | None = None

    @classmethod
    def resume(cls, episode: Episode, evaluator: Evaluator, settings: Settings | None = None,
               problem: Problem | None = None) -> Self:
        """An env carrying on a stored episode (the server, after a restart)."""
        env = cls(evaluator, reward=episode.reward_fn, max_turns=episode.max_turns, settings=settings)
        env.episode, env.problem = episode, problem or resolve(episode.task)
        return env

    def close(self) -> None:
        if self._owned:
            self.evaluator.close()

    # -- reset -------------------------------------------------------------------------------
    def reset(self, task: str | Problem, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        problem = task if isinstance(task, Problem) else resolve(task)
        run_shapes, graded_shapes = shape_groups(problem, self.evaluator.device)
        name = self.reward if isinstance(self.reward, str) else getattr(self.reward, "__name__", "custom")
        self.problem = problem
        self.episode = Episode(task=problem.name, problem_hash=problem_hash(problem), reward_fn=name,
                               max_turns=self.max_turns, run_shapes=run_shapes, graded_shapes=graded_shapes)
        prompt = task_prompt(problem, run_shapes, self.max_turns)
        return prompt, {"episode": self.episode.id, "task": problem.name, "tools": ["run_kernel", "finish"],
                        "max_turns": self.max_turns, "shapes": run_shapes}

    # -- step, in two halves: what to evaluate, then what its verdict means ----------------------
    def _plan(self, action: ToolCall | dict[str, Any]) -> _Plan:
        episode = self._episode()
        if episode.done:
            raise EpisodeOver(f"episode {episode.id} is over: reset for a new one")
        call = action if isinstance(action, ToolCall) else ToolCall.model_validate(action)
        if call.tool == "finish":
            return _Plan(call=call, job=self._grade(), graded=True)
        code = call.code or ""
        if len(code.encode()) > MAX_SOURCE_BYTES:
            return _Plan(call=call, refused=f"the code is {len(code.encode())} bytes; at most {MAX_SOURCE_BYTES}")
        snapshot = SourceSnapshot.from_code(code, "solution.py")
        settings = self.settings.model_copy(update={"shapes": episode.run_shapes})
        job = self.evaluator.submit(self._problem(), snapshot, settings, label=f"episode:{episode.id}")
        return _Plan(call=call, job=job)

    def _grade(self) -> str | None:
        episode = self._episode()
        if episode.best_source is None:
            return None
        snapshot = self.evaluator.queue.source(episode.best_source)
        settings = self.settings.model_copy(update={"shapes": episode.graded_shapes})
        episode.graded_job = self.evaluator.submit(self._problem(), snapshot, settings,
                                                   label=f"episode:{episode.id}:graded")
        return episode.graded_job

    def _conclude(self, plan: _Plan, result: Result | None) -> StepResult:
        episode = self._episode()
        if plan.graded:
            return self._finished(plan, result, truncated=False)
        verdict = self._verdict(plan, result)
        reward = self._reward(verdict)
        view = agent_view(verdict, reward)
        episode.turns.append(Turn(tool="run_kernel", job=plan.job, status=verdict.status, reward=reward))
        if plan.job is not None and (episode.best_reward is None or reward > episode.best_reward):
            job = self.evaluator.queue.get(plan.job)
            episode.best_job, episode.best_reward = plan.job, reward
            episode.best_source = job.source_hash if job else None
        info: dict[str, Any] = {"view": view.model_dump(mode="json"), "turn": episode.runs,
                                "best_reward": episode.best_reward}
        # at the turn limit the caller grades the best kernel at once (`_grading`), in this step
        return StepResult(observation=render(view), reward=reward, terminated=False,
                          truncated=episode.runs >= episode.max_turns, info=info)

    def _grading(self) -> _Plan:
        return _Plan(call=ToolCall(tool="finish"), job=self._grade(), graded=True)

    def _finished(self, plan: _Plan, result: Result | None, truncated: bool) -> StepResult:
        episode = self._episode()
        if plan.job is None:
            episode.final_reward = 0.0
            text = "no kernel was run in this episode: nothing to grade"
            view = None
        else:
            verdict = self._verdict(plan, result)
            episode.final_reward = self._reward(verdict)
            view = agent_view(verdict, episode.final_reward, graded=True)
            text = graded_on(verdict, episode) + "\n" + render(view)
        episode.turns.append(Turn(tool="finish", job=plan.job, status=view.status if view else None,
                                  reward=episode.final_reward))
        episode.terminated, episode.truncated = not truncated, truncated
        info = {"final_reward": episode.final_reward, "final": view.model_dump(mode="json") if view else None,
                "best_reward": episode.best_reward}
        return StepResult(observation=text, reward=episode.final_reward, terminated=not truncated,
                          truncated=truncated, info=info)

    def _verdict(self, plan: _Plan, result: Result | None) -> Verdict:
        episode = self._episode()
        if plan.refused is not None or result is None or result.verdict is None:
            why = plan.refused or (result.error if result else None) or "no verdict"
            status = Status.rejected if plan.refused else Status.internal_error
            return Verdict(status=status, reward=None, problem=episode.task, solution="solution.py", source_hash="",
                           problem_version=self._problem().spec.version, messages=[why])
        return result.verdict

    def _reward(self, verdict: Verdict) -> float:
        value = compute_reward(verdict, self.reward) if isinstance(self.reward, str) else self.reward(verdict)
        return 0.0 if value is None else float(value)

    def _episode(self) -> Episode:
        if self.episode is None:
            raise UserError("step before reset: call reset(task) first")
        return self.episode

    def _problem(self) -> Problem:
        assert self.problem is not None  # set with the episode
        return self.problem


def graded_on(verdict: Verdict, episode: Episode) -> str:
    """What the final grade ran, said as it is: the shapes by split, and why no held-out shape ran
    when none did (a CPU grades its smoke shapes, the ones run_kernel ran)."""
    splits = Counter(shape.split for shape in verdict.shapes)
    ran = ", ".join(f"{count} {split.replace('_', '-')}" for split, count in splits.items()) or "no shape"
    line = f"graded on {ran} shape(s)"
    if "held_out" in splits:
        return line
    if episode.graded_shapes != episode.run_shapes:
        return line + " (no held-out shape ran)"
    on_gpu = "; on a GPU the grade runs every shape" if episode.graded_shapes == "smoke" else ""
    return line + f" ({episode.graded_shapes}: the same shapes run_kernel ran, so no held-out shape was judged{on_gpu})"


class KernelEnv(_EpisodeRules):
    def step(self, action: ToolCall | dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.step_result(action).as_tuple()

    def step_result(self, action: ToolCall | dict[str, Any]) -> StepResult:
        plan = self._plan(action)
        step = self._conclude(plan, self.evaluator.wait(plan.job) if plan.job else None)
        if step.truncated:
            grading = self._grading()
            result = self.evaluator.wait(grading.job) if grading.job else None
            step.info |= self._finished(grading, result, truncated=True).info
        return step


class AsyncKernelEnv(_EpisodeRules):
    """The same episode for asyncio: `await env.step(...)`; many episodes share one evaluator."""

    async def step(self, action: ToolCall | dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return (await self.step_result(action)).as_tuple()

    async def step_result(self, action: ToolCall | dict[str, Any]) -> StepResult:
        plan = self._plan(action)
        step = self._conclude(plan, await self.evaluator.wait_async(plan.job) if plan.job else None)
        if step.truncated:
            grading = self._grading()
            result = await self.evaluator.wait_async(grading.job) if grading.job else None
            step.info |= self._finished(grading, result, truncated=True).info
        return step
