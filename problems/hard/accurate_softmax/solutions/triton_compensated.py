"""Log-softmax in Triton with a compensated row sum, float32 throughout (expected: correct).

Two kernels, two reads of x and one write of y:

1. Statistics. Each program takes one row, or one slice of a row when there are too few rows to
   fill the GPU, and keeps per lane an online triple (m, hi, lo): the lane's running maximum, and
   the sum of exp(x - m) over its elements as an unevaluated pair hi + lo. Every addition into hi
   is a TwoSum, its exact rounding error going to lo. A new maximum rescales the pair by
   exp(m_old - m_new); one exp per element serves both cases (the new term is 1 and the old sum
   shrinks, or the new term is exp(x - m) and nothing shrinks). The lanes, then the slices, are
   merged with the same rule (rescale both pairs to the larger maximum, TwoSum the highs).
2. Output. Each program merges its row's slice triples again (a few dozen numbers), forms
   log S = log1p((hi - 1) + lo) without rounding the pair into one float32 (hi - 1 is exact when
   hi is near 1, the only case where it matters), and writes y = (x - m) - log S.

The top token of a confident row has y = -log(1 + T) with T down to 1e-9; a row sum held in one
float32 number would round T away, which is what this problem tests.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _log1p(u):
    # log1p from log: w = 1 + u is rounded, but log(w) * u / (w - 1) cancels that rounding to a
    # few ulps (Goldberg, "What every computer scientist should know about floating-point", 1991)
    w = 1.0 + u
    return tl.where(w == 1.0, u, tl.log(w) * (u / (w - 1.0)))


@triton.jit
def _two_sum(a, b):
    s = a + b
    b_virtual = s - a
    err = (a - (s - b_virtual)) + (b - b_virtual)
    return s, err


@triton.jit
def _merge(m1, hi1, lo1, m2, hi2, lo2):
    """Merge two (max, hi, lo) triples; an empty one has m = -inf and hi = lo = 0."""
    m = tl.maximum(m1, m2)
    safe = tl.where(m == float("-inf"), 0.0, m)
    f1 = tl.where(m1 == float("-inf"), 0.0, tl.exp(m1 - safe))
    f2 = tl.where(m2 == float("-inf"), 0.0, tl.exp(m2 - safe))
    hi, err = _two_sum(hi1 * f1, hi2 * f2)
    return m, hi, lo1 * f1 + lo2 * f2 + err


@triton.jit
def _row_stats(x_ptr, part_ptr, n_cols, chunk, splits, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    x_row = x_ptr + row * n_cols
    offsets = tl.arange(0, BLOCK)
    start = split * chunk
    stop = tl.minimum(start + chunk, n_cols)

    m = tl.full([BLOCK], float("-inf"), tl.float32)
    hi = tl.zeros([BLOCK], tl.float32)
    lo = tl.zeros([BLOCK], tl.float32)
    for base in range(start, stop, BLOCK):
        cols = base + offsets
        x = tl.load(x_row + cols, mask=cols < stop, other=float("-inf"))
        grows = x > m
        t = tl.exp(-tl.abs(x - m))  # exp(m - x) if x is the new maximum, else exp(x - m)
        empty = x == float("-inf")  # masked lanes (and a lane whose max is still -inf)
        term = tl.where(empty, 0.0, tl.where(grows, 1.0, t))
        scale = tl.where(empty, 1.0, tl.where(grows, t, 1.0))
        hi, err = _two_sum(hi * scale, term)
        lo = lo * scale + err
        m = tl.where(empty, m, tl.maximum(m, x))

    m_row, hi_row, lo_row = tl.reduce((m, hi, lo), 0, _merge)
    out = part_ptr + row * splits + split
    rows = tl.num_programs(0).to(tl.int64) * splits
    tl.store(out, m_row)
    tl.store(out + rows, hi_row)
    tl.store(out + 2 * rows, lo_row)


@triton.jit
def _write_logp(x_ptr, y_ptr, part_ptr, n_cols, chunk, splits,
                BLOCK: tl.constexpr, SPLITS_P2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    rows = tl.num_programs(0).to(tl.int64) * splits
    parts = tl.arange(0, SPLITS_P2)
    valid = parts < splits
    src = part_ptr + row * splits + parts
    m = tl.load(src, mask=valid, other=float("-inf"))
    hi = tl.load(src + rows, mask=valid, other=0.0)
    lo = tl.load(src + 2 * rows, mask=valid, other=0.0)
    m_row, hi_row, lo_row = tl.reduce((m, hi, lo), 0, _merge)
    log_sum = _log1p((hi_row - 1.0) + lo_row)

    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    offsets = tl.arange(0, BLOCK)
    start = split * chunk
    stop = tl.minimum(start + chunk, n_cols)
    for base in range(start, stop, BLOCK):
        cols = base + offsets
        mask = cols < stop
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, (x - m_row) - log_sum, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty_like(x)
        if rows == 0 or cols == 0:
            return y
        if x.is_cuda:
            block, warps, min_blocks = 2048, 8, 8
            programs = 4 * torch.cuda.get_device_properties(x.device).multi_processor_count
        else:  # the Triton interpreter: small blocks, and slices, so that the merge is exercised
            block, warps, min_blocks, programs = 256, 4, 1, 2 * rows
        # slice rows only as far as it takes to fill the GPU, never below min_blocks a slice
        splits = max(1, min(triton.cdiv(programs, rows), triton.cdiv(cols, min_blocks * block)))
        chunk = triton.cdiv(triton.cdiv(cols, splits), block) * block
        splits = triton.cdiv(cols, chunk)
        parts = torch.empty((3, rows, splits), dtype=torch.float32, device=x.device)
        grid = (rows, splits)
        _row_stats[grid](x, parts, cols, chunk, splits, BLOCK=block, num_warps=warps)
        _write_logp[grid](x, y, parts, cols, chunk, splits, BLOCK=block,
                          SPLITS_P2=triton.next_power_of_2(splits), num_warps=warps)
        return y
