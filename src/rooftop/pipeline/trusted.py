"""The trusted side's copy of the problem: the reference model, its inputs and its outputs.

It runs in the evaluating process, never in the child. From a seed it makes the same inputs the
child will make, runs the reference on them (timed with the same clock as the candidate, so the
eager baseline is measured on the trusted side) and keeps the expected outputs to itself.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch

from rooftop.check.inputs import InputPool, clone, construct, device_memory, init_inputs, make_inputs, set_precision
from rooftop.problem.spec import Problem, Shape

_counter = itertools.count()


class ReferenceFailed(Exception):
    """The problem's own code failed: the verdict is internal_error, never the candidate's fault."""


@contextmanager
def blame_reference(what: str) -> Iterator[None]:
    try:
        yield
    except ReferenceFailed:
        raise
    except Exception as exc:
        raise ReferenceFailed(f"{what} of the problem failed: {type(exc).__name__}: {exc}") from exc


class TrustedReference:
    def __init__(self, problem: Problem, device: str, weights_seed: int) -> None:
        self.problem, self.spec = problem, problem.spec
        self.device = torch.device(device)
        self.weights_seed = weights_seed
        self._models: dict[str, Any] = {}
        self._pool = InputPool(device_memory(self.device))
        self._graphs: dict[str, Any] = {}
        set_precision(self.spec)
        with blame_reference("importing reference.py"):
            self.module = import_reference(problem)
        self.clock: Any = None

    def model(self, shape: Shape) -> Any:
        if shape.name not in self._models:
            with blame_reference("constructing the reference Model"):
                init = init_inputs(self.module, self.spec, shape)
                model = construct(self.module.Model, init, self.weights_seed, self.device)
                self._models[shape.name] = model.to(self.device).eval()
        return self._models[shape.name]

    def inputs(self, shape: Shape, seed: int) -> list[Any]:
        with blame_reference("get_inputs"):
            return make_inputs(self.module, self.spec, shape, seed, self.device)

    def run(self, shape: Shape, inputs: list[Any], timed: bool = False,
            graph: bool = False) -> tuple[Any, float | None]:
        """The expected output for these inputs (on a copy), and its time when asked: timed
        like the candidate, from the same kind of input pool, in a CUDA graph when it is."""
        model = self.model(shape)
        args = clone(inputs)
        box: dict[str, Any] = {}

        def call() -> None:
            box["out"] = model(*args)

        with torch.no_grad(), blame_reference("the reference forward"):
            seconds = None
            if timed and graph and self.device.type == "cuda":
                graphed = self._graphed(shape, model, args)
                seconds = self._clock().time(graphed.replay)
                box["out"] = clone(graphed.outputs)  # the next replay overwrites them
            elif timed:
                self._pool.admit(args, shape.name)
                seconds = self._clock().time(call)
            else:
                call()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        return box["out"], seconds

    def _graphed(self, shape: Shape, model: Any, args: list[Any]) -> Any:
        from rooftop.measure.graphs import GraphedCall

        if shape.name not in self._graphs:
            self._graphs.clear()  # one shape's graph at a time
            self._graphs[shape.name] = GraphedCall(model, args)
        self._graphs[shape.name].load(args)
        return self._graphs[shape.name]

    def _clock(self) -> Any:
        if self.clock is None:
            from rooftop.measure.timer import CpuClock, CudaEventClock

            self.clock = CudaEventClock(self.device) if self.device.type == "cuda" else CpuClock()
        return self.clock

    def release(self) -> None:
        self._models.clear()
        self._pool.clear()
        self._graphs.clear()
        self.clock = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def import_reference(problem: Problem) -> ModuleType:
    path = problem.reference
    name = f"rooftop_reference_{next(_counter)}"
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        if added:
            sys.path.remove(folder)
