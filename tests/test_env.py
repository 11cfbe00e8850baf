"""The environment API: episodes over a running evaluation service, their rewards, and what an
agent may learn of held-out shapes (nothing, before grading; counts only, after)."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
import yaml
from conftest import FIXTURES

from rooftop.env import AsyncKernelEnv, KernelEnv
from rooftop.env.core import EpisodeOver
from rooftop.env.prompt import task_card, task_prompt
from rooftop.errors import UserError
from rooftop.problem.registry import bundled_names, resolve
from rooftop.service.evaluator import Evaluator

GOOD = (FIXTURES / "solutions/good.py").read_text()
ALIASED = """import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()

    def forward(self, x):
        return x
"""
# right on the shapes it was shown, and on any other it says what it saw
PEEKING = GOOD.replace("        return x * self.alpha",
                       "        if x.shape[1] != 256:\n"
                       "            raise RuntimeError(f'peeked N={x.shape[1]} B={x.shape[0]}')\n"
                       "        return x * self.alpha")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator(tmp_path_factory.mktemp("env") / "r.db", "cpu") as running:
        yield running


@pytest.fixture(scope="module")
def held_out_problem(tmp_path_factory):
    """`scale` without smoke shapes: on a CPU its episode runs the visible shape and grades the
    held-out one too (B=3, N=1001)."""
    folder = tmp_path_factory.mktemp("problems") / "scale_held_out"
    shutil.copytree(FIXTURES / "problems/scale", folder)
    spec = yaml.safe_load((folder / "problem.yaml").read_text())
    spec.pop("smoke")
    spec["shapes"][1]["note"] = "the secret odd shape"
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    return str(folder)


def test_an_episode_keeps_the_best_kernel_and_grades_it_on_finish(evaluator):
    env = KernelEnv(evaluator, max_turns=4)
    prompt, info = env.reset(str(FIXTURES / "problems/scale"))
    assert "ModelNew" in prompt and "run_kernel" in prompt and info["shapes"] == "smoke"
    text, reward, terminated, truncated, info = env.step({"tool": "run_kernel", "code": ALIASED})
    assert text.startswith("status: incorrect") and reward == -2.0 and not terminated and not truncated
    text, good_reward, *_ = env.step({"tool": "run_kernel", "code": GOOD})
    assert text.startswith("status: correct") and good_reward > -2.0
    env.step({"tool": "run_kernel", "code": "this is not python"})
    assert env.episode is not None and env.episode.best_reward == good_reward
    text, reward, terminated, truncated, info = env.step({"tool": "finish"})
    assert terminated and not truncated and info["final"]["status"] == "correct" and reward == info["final_reward"]
    # on a CPU the grade runs the smoke shapes run_kernel ran: it says so, not "every shape"
    assert text.startswith("graded on 1 smoke shape(s)") and "no held-out shape was judged" in text.splitlines()[0]
    assert [t.status.value for t in env.episode.turns if t.status] == ["incorrect", "correct", "compile_error",
                                                                       "correct"]
    with pytest.raises(EpisodeOver):
        env.step({"tool": "finish"})


def test_the_turn_limit_truncates_and_grades(evaluator):
    env = KernelEnv(evaluator, max_turns=1, reward=lambda verdict: 1.0 if verdict.status.value == "correct" else -1)
    env.reset(str(FIXTURES / "problems/scale"))
    _, reward, terminated, truncated, info = env.step({"tool": "run_kernel", "code": GOOD})
    assert reward == 1.0 and truncated and not terminated and info["final_reward"] == 1.0


def test_finish_without_a_kernel_grades_nothing(evaluator):
    env = KernelEnv(evaluator)
    env.reset(str(FIXTURES / "problems/scale"))
    text, reward, terminated, _, info = env.step({"tool": "finish"})
    assert terminated and reward == 0.0 and info["final"] is None and "nothing to grade" in text


def test_bad_arguments_are_one_line_errors(evaluator):
    with pytest.raises(UserError, match="reward: unknown reward function 'fast'"):
        KernelEnv(evaluator, reward="fast")
    env = KernelEnv(evaluator)
    with pytest.raises(UserError, match="reset"):
        env.step({"tool": "finish"})
    env.reset(str(FIXTURES / "problems/scale"))
    with pytest.raises(ValueError, match="tool"):
        env.step({"tool": "rm -rf"})


def test_held_out_shapes_stay_hidden_until_graded_and_their_messages_after(evaluator, held_out_problem):
    secrets = ("1001", "odd", "secret")
    env = KernelEnv(evaluator, max_turns=3)
    prompt, info = env.reset(held_out_problem)
    seen = [prompt, json.dumps(info)]
    text, reward, _, _, info = env.step({"tool": "run_kernel", "code": PEEKING})
    assert text.startswith("status: correct"), text  # only the visible shape ran
    seen += [text, json.dumps(info)]
    text, reward, terminated, _, info = env.step({"tool": "finish"})
    assert terminated and info["final"]["status"] == "runtime_error"  # the held-out shape made it talk
    assert info["final"]["splits"]["held_out"] == {"shapes": 1, "correct": 0, "geomean_speedup": None, "unmeasured": 0}
    seen += [text, json.dumps(info)]
    for secret in secrets:
        assert not any(secret in s for s in seen), secret
    stored = evaluator.wait(env.episode.graded_job).verdict  # the store keeps what the agent is not shown
    assert any("peeked N=1001" in m for m in stored.messages)


def test_no_prompt_or_task_card_names_a_held_out_shape():
    for name in bundled_names():
        problem = resolve(name)
        hidden = [s for s in problem.spec.shapes if s.split.value == "held_out"]
        shown = [s.name for s in problem.spec.shapes if s.split.value != "held_out"]
        for text in (task_prompt(problem), task_card(problem).model_dump_json()):
            for shape in hidden:
                assert shape.name not in text or shape.name in shown, (name, shape.name)
                if shape.note:
                    assert shape.note not in text, (name, shape.note)


def test_async_episodes_run_side_by_side(evaluator):
    async def episode(code: str) -> float:
        env = AsyncKernelEnv(evaluator, max_turns=2)
        env.reset(str(FIXTURES / "problems/scale"))
        await env.step({"tool": "run_kernel", "code": code})
        _, reward, terminated, _, _ = await env.step({"tool": "finish"})
        assert terminated
        return reward

    async def both() -> list[float]:
        return list(await asyncio.gather(episode(GOOD + "\n# a\n"), episode(ALIASED)))

    good, aliased = asyncio.run(both())
    assert aliased == -2.0 and good > aliased


def test_asking_for_a_gpu_without_one_is_a_one_line_error_not_a_wait(tmp_path, monkeypatch):
    """KernelEnv(device="cuda") on a machine without a GPU: jobs for a GPU waited for a device
    worker that never came; now the constructor says why at once, as `--device cuda` does."""
    import torch

    from rooftop.errors import UserError
    from rooftop.pipeline.evaluate import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UserError, match="^device cuda: no CUDA GPU is visible"):
        KernelEnv(db=tmp_path / "r.db", device="cuda")
    assert resolve_device("auto") == "cpu"
    with pytest.raises(UserError, match="^--device cuda: no CUDA GPU"):
        resolve_device("cuda", "--device")
