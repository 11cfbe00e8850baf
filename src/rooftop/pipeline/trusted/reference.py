"""The trusted side's copy of the problem: the reference model, its inputs and its outputs.

It runs in the evaluating process, never in the child. From a seed it makes the same inputs the
child will make, runs the reference on them (timed with the same clock as the candidate: the same
compiled timer, and the kernel tracer exactly when the child's is on, so the eager baseline is
measured on the trusted side as the candidate is in the child) and keeps the expected outputs to
itself.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import torch

from rooftop.check.inputs import InputPool, device_memory
from rooftop.check.probe import gather_outputs
from rooftop.measure.contention import cpu_threads, pin_threads
from rooftop.measure.graphs import GraphCache
from rooftop.measure.timer import Clock, clock_for
from rooftop.problem.instance import ProblemInstance, blame_reference
from rooftop.problem.spec import Problem, Shape
from rooftop.values import clone


class Timed(NamedTuple):
    """One timed reference call of a block: its output, its time, and the host's seconds to queue
    it beside the spin before it (a call whose queueing outlasts its spin is bound by its host)."""

    output: Any
    seconds: float
    queued: float
    hold: float


class TrustedReference:
    def __init__(self, problem: Problem, device: str, weights_seed: int) -> None:
        self.instance = ProblemInstance(problem, device, weights_seed)
        self.spec, self.device = problem.spec, self.instance.device
        self._pool = InputPool(device_memory(self.device))
        self._graphs = GraphCache()
        self._clock: Clock | None = None
        self._traced = False
        self._call_seconds: dict[str, float] = {}
        self.changed_inputs = False  # the last run changed its inputs in place
        # a CPU timing gives both sides the same fixed thread count (the child gets it from its
        # environment); this process's own count comes back at release
        self._threads = torch.get_num_threads()
        if self.device.type == "cpu":
            pin_threads(cpu_threads())

    def call_seconds(self, shape: Shape) -> float:
        """Wall seconds of one untimed reference call of this shape (model built first): what the
        per-shape deadlines scale with when the settings give none."""
        if shape.name not in self._call_seconds:
            self.instance.model(shape)
            inputs = self.inputs(shape, 0)
            started = time.perf_counter()
            self.run(shape, inputs)
            self._call_seconds[shape.name] = time.perf_counter() - started
        return self._call_seconds[shape.name]

    @property
    def clock(self) -> Clock:
        if self._clock is None:
            self._clock = clock_for(self.device, traced=self._traced)
        return self._clock

    @property
    def traced(self) -> bool:
        """Whether the reference's timed calls carry CUPTI's kernel records: exactly when the
        candidate's do, so that neither side pays for the tracer alone."""
        return self._traced

    @traced.setter
    def traced(self, on: bool) -> None:
        if on != self._traced:
            self._traced, self._clock = on, None

    def inputs(self, shape: Shape, seed: int, timed: bool = False) -> list[Any]:
        """A call's inputs; a timed call's join the pool, whose oldest set goes first."""
        if timed:
            self._pool.make_room(shape.name)
        return self.instance.inputs(shape, seed)

    def run(self, shape: Shape, inputs: list[Any]) -> Any:
        """The expected output for these inputs, untimed.

        The reference runs on the inputs themselves, not a copy (a copy of a 6 GB input is 6 GB the
        device may not have); a reference that changed them in place (their version counters moved)
        gets them made again from the same seed by the caller (`changed_inputs`)."""
        model = self.instance.model(shape)
        versions = _versions(inputs)
        with torch.no_grad(), blame_reference("the reference forward"):
            out = model(*inputs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        self.changed_inputs = _versions(inputs) != versions
        return out

    def run_block(self, shape: Shape, seeds: list[int], graph: bool = False,
                  pool_sets: int | None = None, probe: bool = False) -> list[Timed]:
        """Timed calls on the inputs of each seed, queued back to back and waited for once, as the
        child queues the candidate's (measure/timer.py): the same clock, the same kind of input
        pool (`pool_sets` sets, the memory plan's figure, as the child keeps), each call's inputs
        made by the clock after its spin, itself after the last call's end event in stream order;
        a CUDA-graph replay when `graph`. With `probe`, each call's outputs are gathered at random
        positions after its end event and held to the block's end, as the child gathers the
        candidate's: on an H200 that gather cost the GEMM after it about 7 us (a self-check of
        10_3D_tensor_matrix_multiplication read 0.993 while only the candidate's calls carried
        it, 1.000 with both)."""
        model = self.instance.model(shape)
        clock, queued, gathered = self.clock, [], []
        with torch.no_grad(), blame_reference("the reference forward"):
            for seed in seeds:
                out = self._queue(shape, model, seed, graph, pool_sets)
                queued.append((out, float(getattr(clock, "last_queued", 0.0)), float(getattr(clock, "last_hold", 0.0))))
                if probe:
                    gathered.append(gather_outputs(out))
            seconds = clock.collect()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        del gathered  # the candidate's are read after its block's wait; the reference's are not needed
        return [Timed(out, taken, host, hold) for (out, host, hold), taken in zip(queued, seconds)]

    def _queue(self, shape: Shape, model: Any, seed: int, graph: bool, pool_sets: int | None) -> Any:
        """One timed call queued on the clock, its inputs made after the spin; its output (a copy
        of a graph's, which the next replay overwrites)."""
        box: dict[str, Any] = {}
        graph = graph and self.device.type == "cuda"

        def made() -> None:
            inputs = self.inputs(shape, seed, timed=True)
            if graph:
                box["graphed"] = self._graphs.load(shape.name, model, inputs)
            else:
                self._pool.admit(inputs, shape.name, pool_sets)  # as many sets as the child keeps
                box["inputs"] = inputs

        def call() -> None:
            if graph:
                box["graphed"].replay()
            else:
                box["out"] = model(*box["inputs"])

        if graph and not self._graphs.holds(shape.name):  # captured on inputs of its own, before the clock
            self._graphs.load(shape.name, model, self.inputs(shape, seed, timed=True))
        self.clock.queue(call, made)
        return clone(box["graphed"].outputs) if graph else box["out"]

    def release(self) -> None:
        import gc

        gc.collect()  # expected outputs held in reference cycles go now, before the cache is emptied
        torch.set_num_threads(self._threads)
        self.instance.release()
        self._pool.clear()
        self._graphs.clear()
        self._clock = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def _versions(values: list[Any]) -> list[int]:
    """The in-place version counter of each tensor input (it moves whenever one is written)."""
    return [v._version for v in values if isinstance(v, torch.Tensor)]
