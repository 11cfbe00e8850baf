"""Seeded inputs for one shape, the pool they live in, and the helpers that keep them honest
(clones, snapshots)."""

from __future__ import annotations

import collections
import math

from types import ModuleType
from typing import Any

import torch

from rooftop.problem.spec import ProblemSpec, Shape


def _call(fn: Any, spec: ProblemSpec, shape: Shape) -> Any:
    return fn() if spec.kernelbench else fn(**shape.params)


def init_inputs(reference: ModuleType, spec: ProblemSpec, shape: Shape) -> list[Any]:
    return list(_call(reference.get_init_inputs, spec, shape))


def construct(cls: Any, init: list[Any], seed: int, device: torch.device) -> Any:
    """A model for one shape, its weights drawn from `seed` on the evaluation device.

    Every side that builds a model (the trusted reference, the child's copy of its weights, the
    candidate, the baselines) builds it this way, so the same seed gives the same weights; drawing
    them on the GPU takes milliseconds where a CPU needs minutes for a MoE layer's gigabytes.
    """
    torch.manual_seed(seed)
    with torch.device(device):
        return cls(*clone(init))


def make_inputs(reference: ModuleType, spec: ProblemSpec, shape: Shape, seed: int, device: torch.device) -> list[Any]:
    """The forward arguments for one seed, made on the evaluation device.

    Both sides call this with the same seed and get the same bits: the trusted side to compute
    the expected output, the child just before the call. Factory calls in `get_inputs` default to
    the evaluation device, so large inputs are drawn by the GPU's generator, not copied over.
    """
    torch.manual_seed(seed)
    with torch.device(device):
        made = _call(reference.get_inputs, spec, shape)
    return [to_device(x, device) for x in made]


def set_precision(spec: ProblemSpec) -> None:
    """fp32 means IEEE fp32: no TF32 in cuBLAS or cuDNN (cuDNN allows it by default), unless the
    problem says tf32. The reference, its eager timing and the candidate all run under this."""
    tf32 = "tfloat32" in (spec.dtype, spec.peak_dtype)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(clone(v) for v in value)
    return value


def tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


def modified_inputs(before: list[Any], after: list[Any]) -> list[int]:
    """Indices of tensor inputs whose values changed (NaN-aware, bitwise)."""
    changed = []
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor):
            if b.is_floating_point() and b.element_size() == 1 and a.dtype == b.dtype:
                a, b = a.view(torch.uint8), b.view(torch.uint8)  # fp8: compare bits (few kernels exist for it)
            same = b.shape == a.shape and bool(((a == b) | (a.isnan() & b.isnan())).all()) \
                if b.is_floating_point() else torch.equal(a, b)
            if not same:
                changed.append(i)
    return changed


POOL_BYTES = 256 << 20  # a pool this large is far beyond any L2
POOL_MIN_SETS, POOL_MAX_SETS = 8, 50


def pool_size(set_bytes: int, memory_bytes: int | None = None) -> int:
    """How many input sets a shape's pool holds: enough for 256 MB or 8 sets, at most 50, and
    within a quarter of the device memory (never below 2, so consecutive calls always differ)."""
    size = max(POOL_MIN_SETS, math.ceil(POOL_BYTES / max(set_bytes, 1)))
    size = min(size, POOL_MAX_SETS)
    if memory_bytes and set_bytes:
        size = min(size, memory_bytes // 4 // set_bytes)
    return max(2, size)


def device_memory(device: torch.device) -> int | None:
    """Total memory of a CUDA device (what pools are sized against); None on the CPU."""
    return torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None


def nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(value))


class InputPool:
    """The input sets of the last calls of one shape, kept alive and cycled.

    Every call gets a fresh set (its own seed); admitting it retires the oldest of the pool. Since
    the newer sets stay allocated, the allocator cannot give a call the addresses of any of the
    calls just before it, and the data a call reads was written (and flushed from the caches)
    long before: no call sees the pointers or the values of the previous one.
    """

    def __init__(self, memory_bytes: int | None = None) -> None:
        self.memory_bytes = memory_bytes
        self.size: int | None = None  # fixed by the first set admitted
        self._sets: collections.deque[Any] = collections.deque()
        self._shape: str | None = None

    def admit(self, inputs: Any, shape: str | None = None) -> Any:
        """Keep this call's set; a set of another shape starts the pool afresh (one shape's sets
        are alive at a time)."""
        if shape != self._shape:
            self._shape, self.size = shape, None
            self._sets.clear()
        if self.size is None:
            self.size = pool_size(nbytes(inputs), self.memory_bytes)
        while len(self._sets) >= self.size:
            self._sets.popleft()
        self._sets.append(inputs)
        return inputs

    def __len__(self) -> int:
        return len(self._sets)

    def clear(self) -> None:
        self._sets.clear()
