"""A problem loaded in one process: its reference module, the models and inputs of its shapes.

The trusted side, the evaluation child (which copies the reference's weights into the candidate)
and the baselines all hold the problem through this class, so that the same seed gives the same
weights and the same inputs on every side, and the problem's own failures are blamed on it.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from rooftop.problem.spec import Problem, ProblemSpec, Shape
from rooftop.values import clone, to_device
from rooftop.verdict import GateFailed, Status

_counter = itertools.count()


def import_file(path: Path, name: str | None = None, keep_path: bool = False) -> ModuleType:
    """Import one .py file as a fresh module, with its folder on the import path while it runs
    (kept afterwards when asked: a solution may import its siblings lazily, at call time). A named
    module is registered in sys.modules under that name; an unnamed one stays private."""
    register = name is not None
    name = name or f"rooftop_module_{next(_counter)}"
    folder = str(path.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        if register:
            sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        if added and not keep_path:
            sys.path.remove(folder)


@contextmanager
def blame_reference(what: str) -> Iterator[None]:
    """The problem's own code failing is rooftop's problem (internal_error), never the candidate's."""
    try:
        yield
    except GateFailed:
        raise
    except Exception as exc:
        raise GateFailed(Status.internal_error, f"{what} of the problem failed: {type(exc).__name__}: {exc}") from exc


def _call(fn: Any, spec: ProblemSpec, shape: Shape) -> Any:
    """`fn(**params)`; a KernelBench file's functions take no arguments and read its module
    constants, which are set to the shape's params first (the same values for its `default`
    shape, smaller ones for the smoke shape derived from them)."""
    if not spec.kernelbench:
        return fn(**shape.params)
    set_constants(getattr(fn, "__globals__", {}), shape.params)
    return fn()


def set_constants(namespace: dict[str, Any], params: dict[str, Any]) -> None:
    """A KernelBench-style module's constants (its namespace) set to these params, those it defines."""
    namespace.update({k: v for k, v in params.items() if k in namespace})


def init_inputs(reference: ModuleType, spec: ProblemSpec, shape: Shape) -> list[Any]:
    return list(_call(reference.get_init_inputs, spec, shape))


def seed_generators(seed: int, device: torch.device) -> None:
    """What `torch.manual_seed` does for the generators an evaluation uses (the CPU's and the
    GPUs'), without seeding back ends it never uses: seeding XPU and MTIA before they start records
    a stack trace each time, a millisecond of every call's input making."""
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda" or torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def construct(cls: Any, init: list[Any], seed: int, device: torch.device) -> Any:
    """A model for one shape, its weights drawn from `seed` on the evaluation device.

    Every side that builds a model builds it this way, so the same seed gives the same weights;
    drawing them on the GPU takes milliseconds where a CPU needs minutes for a MoE layer's gigabytes.
    """
    seed_generators(seed, device)
    with torch.device(device):
        return cls(*clone(init))


def make_inputs(reference: ModuleType, spec: ProblemSpec, shape: Shape, seed: int, device: torch.device) -> list[Any]:
    """The forward arguments for one seed, made on the evaluation device.

    Both sides call this with the same seed and get the same bits. Factory calls in `get_inputs`
    default to the evaluation device, so large inputs are drawn by the GPU's generator, not copied.
    """
    return [to_device(x, device) for x in drawn_inputs(reference, spec, shape, seed, device)]


def drawn_inputs(reference: ModuleType, spec: ProblemSpec, shape: Shape, seed: int, device: torch.device) -> list:
    """What `get_inputs` returns for this seed with the evaluation device as the factories' default
    (a tensor it puts on another device explicitly stays there: `make_inputs` moves it)."""
    seed_generators(seed, device)
    with torch.device(device):
        return list(_call(reference.get_inputs, spec, shape))


def set_precision(spec: ProblemSpec) -> None:
    """fp32 means IEEE fp32: no TF32 in cuBLAS or cuDNN (cuDNN allows it by default), unless the
    problem says tf32. And half-precision GEMMs accumulate in fp32 to the end: cuBLAS may otherwise
    add split-K partial sums in bf16/fp16 (allowed by default), which leaves the reference up to a
    tolerance's width from the exact product, so that an exact kernel would fail on some seeds.
    The reference, its eager timing and the candidate all run under this."""
    tf32 = "tfloat32" in (spec.dtype, spec.peak_dtype)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def _on(where: torch.device, device: torch.device) -> bool:
    """Whether a tensor on `where` is on `device` ('cuda' names whichever GPU is current: cuda:0 is on it)."""
    return where.type == device.type and (device.index is None or where.index == device.index)


class ProblemInstance:
    """The problem in this process: reference imported once, one shape's reference model at a time."""

    def __init__(self, problem: Problem, device: torch.device | str, weights_seed: int = 0,
                 module_name: str | None = None) -> None:
        self.problem, self.spec = problem, problem.spec
        self.device = torch.device(device)
        self.weights_seed = weights_seed
        set_precision(self.spec)
        with blame_reference("importing reference.py"):
            self.module = import_file(problem.reference, module_name)
        self._model: tuple[str, Any] | None = None
        self.moved_inputs = False  # some input was made on another device and copied to this one

    def init_inputs(self, shape: Shape) -> list[Any]:
        with blame_reference("get_init_inputs"):
            return init_inputs(self.module, self.spec, shape)

    def construct(self, cls: Any, shape: Shape) -> Any:
        """`cls` built for this shape with the problem's init inputs and the weights seed."""
        return construct(cls, self.init_inputs(shape), self.weights_seed, self.device)

    def model(self, shape: Shape) -> Any:
        """The reference model of this shape, on the device, in eval mode (the last shape's is freed)."""
        if self._model is None or self._model[0] != shape.name:
            self._model = None
            with blame_reference("constructing the reference Model"):
                built = self.construct(self.module.Model, shape)
                self._model = (shape.name, built.to(self.device).eval())
        return self._model[1]

    def inputs(self, shape: Shape, seed: int) -> list[Any]:
        with blame_reference("get_inputs"):
            made = drawn_inputs(self.module, self.spec, shape, seed, self.device)
            # a get_inputs that names another device (device="cpu") is copied over, and the verdict says so
            self.moved_inputs = self.moved_inputs or any(
                isinstance(x, torch.Tensor) and not _on(x.device, self.device) for x in made)
            return [to_device(x, self.device) for x in made]

    def release(self) -> None:
        self._model = None
