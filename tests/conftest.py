from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parents[1]


def _spread_over_gpus() -> None:
    """With ROOFTOP_TEST_GPUS=0,1,2,3 and pytest-xdist, worker gwN sees one GPU of the list (N modulo
    its length), so one run's GPU tests spread over a host's GPUs instead of queueing for one lease.
    Set before torch is imported here, so this process and every child it starts see that GPU."""
    gpus = [g.strip() for g in os.environ.get("ROOFTOP_TEST_GPUS", "").split(",") if g.strip()]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if gpus and worker.startswith("gw") and worker[2:].isdigit():
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[int(worker[2:]) % len(gpus)]


_spread_over_gpus()


def _has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


HAS_CUDA = _has_cuda()
HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()


def pytest_configure(config):
    # a pytest-xdist worker sets COLUMNS=80 and LINES for itself; the commands the tests start
    # would inherit them and wrap their output as on an 80-column terminal
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test session builds into its own cache, never the user's."""
    monkeypatch.setenv("ROOFTOP_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def fixture_problem(name: str):
    from rooftop.problem.loader import load_problem
    return load_problem(FIXTURES / "problems" / name)


def run(problem: str, solution: str | Path, **settings):
    """Evaluate a solution (a fixture name, or any path) against a fixture problem on the CPU
    (unless told otherwise)."""
    from rooftop.pipeline.evaluate import evaluate
    from rooftop.solution.loader import load_solution
    from rooftop.vocabulary import Settings

    settings.setdefault("device", "cpu")
    settings.setdefault("timeout", 60)
    path = solution if isinstance(solution, Path) else FIXTURES / "solutions" / solution
    return evaluate(fixture_problem(problem), load_solution(path), Settings(**settings))


def deck_solutions(deck: str):
    """(problem name, solution path, {cpu: STATUS, cuda: STATUS}) for every solution a deck bundles."""
    from rooftop.problem.registry import bundled_names, expected_statuses, resolve

    for name in bundled_names(deck):
        problem = resolve(name)
        for entry, statuses in expected_statuses(problem).items():
            yield name, problem.root / "solutions" / entry, statuses
