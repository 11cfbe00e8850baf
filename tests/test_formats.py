"""Deck formats (problem/formats/): each is registered and found by name, detection picks the right
one for a sample of each kind, and loading and importing go through the format that owns the path."""

from pathlib import Path

import pytest
from conftest import FIXTURES
from test_kernelbench_hard import checkout

from rooftop.errors import SpecError, UserError
from rooftop.plugins import UnknownName
from rooftop.problem.formats import FORMATS, DeckFormat, detect, opener
from rooftop.problem.imports import ImportReport
from rooftop.problem.loader import load_problem

RELU = FIXTURES / "kernelbench_relu.py"


def test_every_format_is_registered_under_its_name():
    assert FORMATS.names() == ["kernelbench", "kernelbench_hard", "rooftop"]
    assert {name: FORMATS[name].deck for name in FORMATS} == {
        "kernelbench": "kernelbench", "kernelbench_hard": "kernelbench-hard", "rooftop": None}
    with pytest.raises(UnknownName, match="kernelbench_hard"):
        FORMATS["tritonbench"]


def kernelbench_checkout(root: Path) -> Path:
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(RELU.read_text())
    return root


def test_detection_picks_the_format_of_each_sample(tmp_path):
    hard = checkout(tmp_path / "kbh")
    kernelbench = kernelbench_checkout(tmp_path / "kb")
    samples = {
        FIXTURES / "problems/scale": "rooftop",
        FIXTURES / "problems/scale/problem.yaml": "rooftop",
        FIXTURES / "problems": "rooftop",
        RELU: "kernelbench",
        kernelbench: "kernelbench",
        kernelbench / "KernelBench/level1": "kernelbench",
        hard: "kernelbench_hard",
        hard / "problems": "kernelbench_hard",
        next((hard / "problems").iterdir()): "kernelbench_hard",
    }
    assert {path: getattr(detect(path), "name", None) for path in samples} == samples
    assert detect(tmp_path / "missing") is None


def test_a_path_is_loaded_by_the_format_that_opens_it(tmp_path):
    assert opener(RELU).name == "kernelbench" and opener(FIXTURES / "problems/scale").name == "rooftop"
    assert load_problem(RELU).spec.kernelbench and load_problem(FIXTURES / "problems/scale").spec.name == "scale"
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(SpecError, match="not a problem folder"):
        load_problem(tmp_path / "notes.txt")
    with pytest.raises(SpecError, match="no problem.yaml in this folder"):
        load_problem(checkout(tmp_path / "kbh") / "problems")  # imported first, never opened


def test_importing_goes_through_the_format(tmp_path):
    report = FORMATS["kernelbench"].import_deck(kernelbench_checkout(tmp_path / "kb"), tmp_path / "decks")
    assert [item.name for item in report.imported] == ["kernelbench/level1/19_ReLU"]
    with pytest.raises(UserError, match="not imported"):
        FORMATS["rooftop"].import_deck(FIXTURES / "problems", tmp_path / "decks")


class Toy(DeckFormat):
    """A format of one file kind, imported as an empty deck."""

    name, rank, deck = "toy", 0, "toy"

    def recognise(self, path: Path) -> bool:
        return path.suffix == ".toy"

    def import_deck(self, path, into, progress=None):
        return ImportReport(root=into)


def test_a_new_format_is_one_registered_class(tmp_path):
    FORMATS.add(Toy.name, Toy())
    try:
        assert detect(tmp_path / "deck.toy").name == "toy"
        assert FORMATS["toy"].import_deck(tmp_path / "deck.toy", tmp_path).imported == []
    finally:
        FORMATS.remove(Toy.name)
    assert detect(tmp_path / "deck.toy") is None
