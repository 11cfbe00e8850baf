"""rooftop as inspect_ai tasks: samples show visible shapes only, answers are graded on every shape
through the evaluation service, and the verdicts land in the store."""

from __future__ import annotations

import importlib
import shutil
import sys

import pytest
import yaml
from conftest import FIXTURES

pytest.importorskip("inspect_ai")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from rooftop.agents import inspect_eval as rooftop_inspect  # noqa: E402
from rooftop.errors import UserError  # noqa: E402
from rooftop.store.db import Store  # noqa: E402

pytestmark = pytest.mark.slow

GOOD = (FIXTURES / "solutions/good.py").read_text()
WRONG = GOOD.replace("return x * self.alpha", "return x")


def answer(code: str) -> str:
    return f"Here is a first try:\n```python\nprint('draft')\n```\nAnd the kernel:\n```python\n{code}```\n"


def reply(text: str) -> ModelOutput:
    output = ModelOutput.from_content("mockllm/model", text)
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # else counted by a downloaded tokenizer
    return output


def mock(*replies: str):
    return get_model("mockllm/model", custom_outputs=[reply(r) for r in replies])


@pytest.fixture(scope="module")
def held_out_problem(tmp_path_factory):
    """`scale` without smoke shapes: on a CPU its sample shows the visible shape and the grading
    runs the held-out one too (B=3, N=1001)."""
    folder = tmp_path_factory.mktemp("problems") / "scale_held_out"
    shutil.copytree(FIXTURES / "problems/scale", folder)
    spec = yaml.safe_load((folder / "problem.yaml").read_text())
    spec.pop("smoke")
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    return str(folder)


@pytest.fixture(scope="module", autouse=True)
def _evaluators():
    yield
    rooftop_inspect.close_evaluators()


def test_the_sample_shows_visible_shapes_only(held_out_problem):
    (sample,) = rooftop_inspect.rooftop_dataset(None, [held_out_problem], device="cpu")
    assert isinstance(sample.input, str)
    assert "256" in sample.input and "1001" not in sample.input and "odd" not in sample.input
    assert "```python" in sample.input and "not seen" in sample.input and "run_kernel" not in sample.input
    assert sample.id == sample.metadata["problem"]
    assert (sample.metadata["run_shapes"], sample.metadata["graded_shapes"]) == ("visible", "all")


@pytest.mark.quiet
def test_answers_are_graded_on_every_shape_and_stored(tmp_path, held_out_problem):
    db = tmp_path / "r.db"
    task = rooftop_inspect.rooftop_task(None, [held_out_problem], device="cpu", db=str(db))
    (log,) = inspect_eval(task, model=mock(answer(GOOD), answer(WRONG), "I would rather not."), epochs=3,
                          max_samples=1, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    assert list((tmp_path / "logs").glob("*.eval"))
    scores = {s.scores["rooftop_scorer"].answer: s.scores["rooftop_scorer"] for s in log.samples or []}
    assert set(scores) == {GOOD, WRONG, ""}
    good, wrong, none = scores[GOOD], scores[WRONG], scores[""]
    assert good.value["correct"] == 1 and good.value["speedup"] > 0, good.explanation
    assert good.metadata["status"] == "correct" and good.metadata["job"]
    assert "held-out shapes: 1/1 correct" in good.explanation and "1001" not in good.explanation
    assert wrong.value == {"correct": 0, "speedup": 0, "roofline": 0}
    assert wrong.metadata["status"] == "incorrect"
    assert none.value["correct"] == 0 and "no ```python block" in none.explanation
    assert log.results is not None
    metrics = {(s.name, m) for s in log.results.scores for m in s.metrics}
    assert {("correct", "accuracy"), ("speedup", "mean"), ("roofline", "mean"), ("speedup", "stderr")} <= metrics
    correct = next(s for s in log.results.scores if s.name == "correct")
    assert correct.metrics["accuracy"].value == pytest.approx(1 / 3)
    store = Store(db)
    try:
        verdicts = store.evaluations.verdicts()
    finally:
        store.close()
    assert sorted(v.status.value for v in verdicts) == ["correct", "incorrect"]
    assert all(v.shapes_selected and len(v.shapes) == 2 for v in verdicts)  # held-out shape included


def test_attempts_feed_back_the_visible_verdict(tmp_path, held_out_problem):
    task = rooftop_inspect.rooftop_task(None, [held_out_problem], device="cpu", db=str(tmp_path / "r.db"),
                                        attempts=2)
    (log,) = inspect_eval(task, model=mock(answer(WRONG), answer(GOOD)), log_dir=str(tmp_path / "logs"),
                          display="none")
    assert log.status == "success", log.error
    (sample,) = log.samples or []
    feedback = [m.text for m in sample.messages if m.role == "user"][1]
    assert "status: incorrect" in feedback and "1001" not in feedback
    assert sample.scores["rooftop_scorer"].value["correct"] == 1


def test_deck_tasks_are_registered_under_the_package():
    assert rooftop_inspect.rooftop_hard(device="cpu").name == "rooftop/hard"
    assert rooftop_inspect.rooftop(deck="examples", problems="softmax", device="cpu").name == "rooftop/rooftop"
    with pytest.raises(UserError, match="no problems"):
        rooftop_inspect.rooftop_task("no_such_deck", device="cpu")


def test_without_inspect_the_import_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.delitem(sys.modules, "rooftop.agents.inspect_eval")
    with pytest.raises(UserError, match=r"rooftop\[inspect\]"):
        importlib.import_module("rooftop.agents.inspect_eval")
