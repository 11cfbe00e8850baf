"""One-pass GPU kernels for the comparisons of gigabyte outputs.

Judged with torch ops, a 6.4 GB output costs a dozen passes over memory for the screening
comparison and five for each fingerprint: about a quarter of a second per seed on an H200, most of
a KernelBench correctness gate. These Triton kernels read each tensor once and compute the same
figures, in float64 in registers (the screen) and in the same integer arithmetic (the digest), so
their results stand in for the torch ones exactly: the screen's are at least as precise, the
digest's are bit for bit the same. They run on the trusted side only, on tensors of at least
`MIN_ELEMENTS` on a CUDA device, compiled into Triton's cache of the user running rooftop, which a
sandboxed child cannot see. Anywhere else compare.py's torch code runs.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import torch

MIN_ELEMENTS = 1 << 24  # below this the torch passes take a few milliseconds: not worth a Triton import
BLOCK = 2048
PROGRAMS_PER_SM = 4
DIGEST_MODULUS = 65521  # the digest's weights: (index within its chunk + 1) mod this prime


def wanted(*tensors: torch.Tensor) -> bool:
    """Whether the fused kernels judge these tensors (large, on a CUDA device, Triton present and
    its kernels built for this device)."""
    return all(t.is_cuda for t in tensors) and tensors[0].numel() >= MIN_ELEMENTS and warm(tensors[0].device)


@functools.cache
def _triton() -> Any:
    try:
        import triton  # noqa: F401
    except ImportError:
        return None
    return _kernels()


@functools.cache
def warm(device: torch.device) -> bool:
    """Import Triton and load (or compile) both kernels with a tiny call, once per device; False
    when they cannot run there, and compare.py's torch passes then judge. The trusted side calls
    this while its child starts, so the first real comparison does not pay for it."""
    if _triton() is None:
        return False
    try:
        ones = torch.ones(4 * BLOCK, device=device)
        screen(ones, ones, 0.0, 0.0, 1.0, programs=1)
        digest(ones.view(torch.int32), 1 << 24, programs=1)
    except Exception:  # a GPU or toolchain Triton cannot build for: the torch passes work everywhere
        return False
    return True


def screen(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float, scale: float,
           programs: int | None = None) -> tuple[float, float, float, float, int, int]:
    """Over the flattened tensors (same shape and dtype): max |c - r|, max |c - r| / max(|r|, tiny),
    sum (c - r)^2, sum r^2 over the elements where both are finite, the count of elements whose
    |c - r| exceeds scale * (atol + rtol * |r|), and the count of elements where |c - r| or |r| is
    not finite (whose figures the others leave out)."""
    kernels = _triton()
    r, c = ref.detach().reshape(-1), cand.detach().reshape(-1)
    n = r.numel()
    grid = programs or _programs(r.device, n)
    params = torch.tensor([atol, rtol, scale, torch.finfo(torch.float64).tiny, torch.finfo(torch.float64).max],
                          dtype=torch.float64, device=r.device)
    partial = torch.empty((grid, 6), dtype=torch.float64, device=r.device)
    with _on(r.device):
        kernels.screen[(grid,)](r, c, params, partial, n, BLOCK=BLOCK, num_warps=8)
    totals = torch.cat([partial[:, :2].amax(0), partial[:, 2:].sum(0)]).tolist()
    return totals[0], totals[1], totals[2], totals[3], int(totals[4]), int(totals[5])


def digest(words: torch.Tensor, chunk: int, programs: int | None = None) -> tuple[int, int]:
    """compare.fingerprint's two sums over a flat int32 tensor: the words' sum and the sum of
    each word times (its index within its `chunk` + 1) mod 65521, the product wrapping in 32 bits,
    the sums in 64."""
    kernels = _triton()
    n = words.numel()
    grid = programs or _programs(words.device, n)
    partial = torch.empty((grid, 2), dtype=torch.int64, device=words.device)
    with _on(words.device):
        kernels.digest[(grid,)](words, partial, n, chunk, MODULUS=DIGEST_MODULUS, BLOCK=BLOCK, num_warps=8)
    first, second = partial.sum(0).tolist()
    return first, second


def _programs(device: torch.device, n: int) -> int:
    tiles = max(1, -(-n // BLOCK))
    if device.type != "cuda":
        return min(tiles, 4)
    return min(tiles, PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count)


def _on(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """The device Triton launches on (tensors on the CPU: the interpreter, in tests)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _kernels() -> Any:
    """The kernels, defined only once Triton is known to import."""

    class Kernels:
        screen = _screen_kernel()
        digest = _digest_kernel()

    return Kernels


def _screen_kernel() -> Any:
    """Per program: the largest absolute and relative errors, the sums of squares of the errors and
    of the reference, and the counts of elements over tolerance and of non-finite ones."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n"])
    def screen_kernel(ref_ptr, cand_ptr, params_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        programs = tl.num_programs(0)
        atol = tl.load(params_ptr)
        rtol = tl.load(params_ptr + 1)
        scale = tl.load(params_ptr + 2)
        tiny = tl.load(params_ptr + 3)
        biggest = tl.load(params_ptr + 4)
        lanes = tl.arange(0, BLOCK)
        max_abs = tl.zeros([BLOCK], dtype=tl.float64)
        max_rel = tl.zeros([BLOCK], dtype=tl.float64)
        diff_sq = tl.zeros([BLOCK], dtype=tl.float64)
        ref_sq = tl.zeros([BLOCK], dtype=tl.float64)
        over = tl.zeros([BLOCK], dtype=tl.float64)
        unfinite = tl.zeros([BLOCK], dtype=tl.float64)
        for tile in range(pid, tl.cdiv(n, BLOCK), programs):
            offsets = tl.cast(tile, tl.int64) * BLOCK + lanes
            inside = offsets < n
            r = tl.load(ref_ptr + offsets, mask=inside, other=0).to(tl.float64)
            c = tl.load(cand_ptr + offsets, mask=inside, other=0).to(tl.float64)
            diff = tl.abs(c - r)
            magnitude = tl.abs(r)
            finite = (diff <= biggest) & (magnitude <= biggest)  # False for NaN and Inf
            unfinite += tl.where(finite, 0.0, 1.0)
            diff = tl.where(finite, diff, 0.0)
            magnitude = tl.where(finite, magnitude, 0.0)
            max_abs = tl.maximum(max_abs, diff)
            max_rel = tl.maximum(max_rel, diff / tl.maximum(magnitude, tiny))
            diff_sq += diff * diff
            ref_sq += magnitude * magnitude
            over += tl.where(diff > (atol + rtol * magnitude) * scale, 1.0, 0.0)
        row = out_ptr + pid * 6
        tl.store(row, tl.max(max_abs, axis=0))
        tl.store(row + 1, tl.max(max_rel, axis=0))
        tl.store(row + 2, tl.sum(diff_sq, axis=0))
        tl.store(row + 3, tl.sum(ref_sq, axis=0))
        tl.store(row + 4, tl.sum(over, axis=0))
        tl.store(row + 5, tl.sum(unfinite, axis=0))

    return screen_kernel


def _digest_kernel() -> Any:
    """Per program: the plain and the position-weighted sums of the words."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n", "chunk"])
    def digest_kernel(words_ptr, out_ptr, n, chunk, MODULUS: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        programs = tl.num_programs(0)
        lanes = tl.arange(0, BLOCK)
        plain = tl.zeros([BLOCK], dtype=tl.int64)
        weighted = tl.zeros([BLOCK], dtype=tl.int64)
        for tile in range(pid, tl.cdiv(n, BLOCK), programs):
            offsets = tl.cast(tile, tl.int64) * BLOCK + lanes
            inside = offsets < n
            word = tl.load(words_ptr + offsets, mask=inside, other=0)
            weight = ((offsets % chunk + 1) % MODULUS).to(tl.int32)
            plain += word.to(tl.int64)
            weighted += (word * weight).to(tl.int64)
        tl.store(out_ptr + pid * 2, tl.sum(plain, axis=0))
        tl.store(out_ptr + pid * 2 + 1, tl.sum(weighted, axis=0))

    return digest_kernel
