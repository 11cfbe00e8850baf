"""The pool a shape's inputs live in, and the snapshots that show whether a call changed them.

Inputs are made by `problem.instance.make_inputs` from a seed, on both sides of the boundary."""

from __future__ import annotations

import collections
import math
from typing import Any

import torch

from rooftop.values import nbytes

CHUNK = 1 << 26  # elements compared at a time: the masks of a 6 GB input would be gigabytes each


def modified_inputs(before: list[Any], after: list[Any]) -> list[int]:
    """Indices of tensor inputs whose values changed (NaN-aware, bitwise)."""
    changed = []
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor):
            if b.is_floating_point() and b.element_size() == 1 and a.dtype == b.dtype:
                a, b = a.view(torch.uint8), b.view(torch.uint8)  # fp8: compare bits (few kernels exist for it)
            if b.shape != a.shape or b.dtype != a.dtype or not _same(b.reshape(-1), a.reshape(-1)):
                changed.append(i)
    return changed


def _same(b: torch.Tensor, a: torch.Tensor) -> bool:
    for start in range(0, b.numel(), CHUNK):
        x, y = b[start:start + CHUNK], a[start:start + CHUNK]
        same = bool(((x == y) | (x.isnan() & y.isnan())).all()) if x.is_floating_point() else torch.equal(x, y)
        if not same:
            return False
    return True


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


# the allocator's cached share of the device past which a checked call's blocks are handed back
RELEASE_SHARE = 0.125


def release_cached(device: torch.device) -> None:
    """After a checked call of a large shape: its snapshot and comparison temporaries split the
    allocator's cached blocks, and handed back the next call's gigabyte sets find whole blocks
    again. A small shape keeps its cache (handing it back costs every next call its allocations)."""
    total = device_memory(device)
    if total is not None and torch.cuda.memory_reserved(device) > RELEASE_SHARE * total:
        torch.cuda.empty_cache()


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

    def admit(self, inputs: Any, shape: str | None = None, sets: int | None = None) -> Any:
        """Keep this call's set; a set of another shape starts the pool afresh (one shape's sets
        are alive at a time). `sets` caps the pool where a memory plan gave a figure."""
        if shape != self._shape:
            self._shape, self.size = shape, None
            self._sets.clear()
        if self.size is None:
            self.size = pool_size(nbytes(inputs), self.memory_bytes)
            if sets is not None:
                self.size = max(2, min(self.size, sets))
        while len(self._sets) >= self.size:
            self._sets.popleft()
        self._sets.append(inputs)
        return inputs

    def make_room(self, shape: str | None = None) -> None:
        """Retire the oldest set of a full pool before the next set is made, so that a pool of n
        sets peaks at n (gigabytes each, where inputs are large), not n + 1 while the new one is
        made; the set just before stays alive, so the next call still gets other addresses."""
        if shape == self._shape and self.size is not None:
            while len(self._sets) >= self.size:
                self._sets.popleft()

    def __len__(self) -> int:
        return len(self._sets)

    def clear(self) -> None:
        self._sets.clear()
