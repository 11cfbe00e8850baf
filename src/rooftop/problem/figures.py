"""Estimated roofline figures for a problem that came without `flops`/`bytes` formulas.

The reference is imported, built and called once with the meta device as torch's default: every
tensor has a shape and a dtype but no memory, so a problem with 16 GiB of inputs is counted in
milliseconds. FLOPs are what `torch.utils.flop_counter.FlopCounterMode` counts (matmuls,
convolutions, attention; elementwise work counts nothing, so the figure is a lower bound); bytes
are the inputs, outputs, parameters and buffers, each storage counted once (an output that is a
view of an input adds nothing). Both bounds err low, so a roofline floor built on them never
claims a kernel is faster than the hardware allows when it is not. (An input the reference
reads only in part is the exception: its bytes count whole.)

Most files count in milliseconds; a recurrent net, whose layers the meta device runs one time
step at a time, takes seconds. A count that takes longer than `BUDGET_S` is given up.
"""

from __future__ import annotations

import os
import signal
import threading
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rooftop.score.hardware import datasheet

# the GPU whose ridge point splits compute-bound from memory-bound problems: KernelBench's own
# baselines were timed on H100s, and the ridge moves little between recent datacenter parts
REFERENCE_GPU = "h100_sxm"

Regime = Literal["compute", "memory"]
BUDGET_S = 120.0  # a guard against a reference that never finishes on the meta device


@dataclass(frozen=True)
class Figures:
    flops: int  # 0 when nothing the counter knows ran
    bytes: int


class CountFailed(Exception):
    """The reference could not be run on the meta device; the message says why, on one line."""


def ridge_point(dtype: str = "float32") -> float:
    """FLOP per byte at which the reference GPU's compute roof meets its bandwidth roof."""
    gpu = next(g for g in datasheet() if g.key == REFERENCE_GPU)
    peak = gpu.peak_flops(dtype) or gpu.peak_flops("float32") or 0.0
    return peak / gpu.dram_bytes_per_s


def regime(figures: Figures, dtype: str = "float32") -> Regime:
    """`compute` when the arithmetic intensity reaches the ridge point, else `memory`."""
    if figures.bytes <= 0:
        return "compute" if figures.flops > 0 else "memory"
    return "compute" if figures.flops / figures.bytes >= ridge_point(dtype) else "memory"


def estimate(reference: Path, constants: dict[str, Any] | None = None) -> Figures:
    """Count the figures of a KernelBench-style reference (get_inputs and get_init_inputs take no
    arguments), with its module constants set to `constants` where given (a derived smaller
    shape's: problem/smoke.py); `CountFailed` when any step cannot run on the meta device or raises."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from rooftop.problem.instance import import_file, set_constants

    try:
        with budget(BUDGET_S), offline(), warnings.catch_warnings(), torch.random.fork_rng(devices=[]), \
                torch.device("meta"), torch.no_grad():
            warnings.simplefilter("ignore")  # a reference's own warnings say nothing about its figures
            module = import_file(reference)
            set_constants(vars(module), constants or {})
            model = module.Model(*module.get_init_inputs())
            if isinstance(model, torch.nn.Module):
                model.eval()
            inputs = list(module.get_inputs())
            with FlopCounterMode(display=False) as counter:
                outputs = model(*inputs)
            tensors = [*tensors_in(inputs), *tensors_in(outputs)]
            if isinstance(model, torch.nn.Module):
                tensors += [*model.parameters(), *model.buffers()]
            return Figures(flops=int(counter.get_total_flops()), bytes=distinct_bytes(tensors))
    except Exception as exc:
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise CountFailed(text if len(text) <= 200 else text[:197] + "...") from None


def tensors_in(value: Any) -> Iterator[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def distinct_bytes(tensors: Iterable[Any]) -> int:
    """Bytes of the tensors, a storage shared by several of them counted at its first tensor."""
    seen: set[int] = set()
    total = 0
    for t in tensors:
        key = t.untyped_storage()._cdata  # the storage's identity: views of one storage share it
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


@contextmanager
def offline() -> Iterator[None]:
    """A reference that loads pretrained weights must not reach the network while it is counted."""
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    saved = {n: os.environ.get(n) for n in names}
    os.environ.update({n: "1" for n in names})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _OverBudget(Exception):
    pass


@contextmanager
def budget(seconds: float, what: str = "counting on the meta device") -> Iterator[None]:
    """Raise `_OverBudget` in the guarded code after `seconds` (main thread only: signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise _OverBudget(f"{what} took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def cached_estimate(reference: Path) -> Figures:
    """`estimate`, kept in the cache per (file contents, torch version): counting imports torch's
    flop counter, which pulls in dynamo and sympy (seconds on a fresh process), so evaluating the
    same single file again skips it. A failed count is kept too, and raised again."""
    import json
    from importlib import metadata

    from rooftop.build.cache import keep, keyed_file

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "unknown"
    path = keyed_file("figures", reference.read_bytes(), torch_version.encode())
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict) and "error" in kept:
        raise CountFailed(str(kept["error"]))
    if isinstance(kept, dict) and isinstance(kept.get("flops"), int) and isinstance(kept.get("bytes"), int):
        return Figures(flops=kept["flops"], bytes=kept["bytes"])
    try:
        figures = estimate(reference)
        record: dict[str, Any] = {"flops": figures.flops, "bytes": figures.bytes}
    except CountFailed as exc:
        record, figures = {"error": str(exc)}, None
    keep(path, json.dumps(record))
    if figures is None:
        raise CountFailed(record["error"])
    return figures
