"""Starter: row softmax in Triton as three kernels, correct but slow.

1. `_row_max`: one program per row walks the row in chunks and writes its maximum to a buffer.
2. `_row_sum_exp`: one program per row walks the row again and writes sum(exp(x - max)).
3. `_normalize`: one program per (row, chunk) reads x a third time and writes exp(x - max) / sum.

x is read three times and two small buffers go through memory between the launches; rows are
processed one per program, so a few very long rows leave most of the GPU idle.
"""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _row_max(x_ptr, max_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=float("-inf"))
        acc = tl.maximum(acc, x)
    tl.store(max_ptr + row, tl.max(acc, axis=0))


@triton.jit
def _row_sum_exp(x_ptr, max_ptr, sum_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    row_max = tl.load(max_ptr + row)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=float("-inf"))
        acc += tl.where(mask, tl.exp(x - row_max), 0.0)
    tl.store(sum_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def _normalize(x_ptr, max_ptr, sum_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    row_max = tl.load(max_ptr + row)
    row_sum = tl.load(sum_ptr + row)
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + cols, tl.exp(x - row_max) / row_sum, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
        row_max = torch.empty(rows, dtype=torch.float32, device=x.device)
        row_sum = torch.empty(rows, dtype=torch.float32, device=x.device)
        block = 1024
        _row_max[(rows,)](x, row_max, cols, x.stride(0), BLOCK=block, num_warps=4)
        _row_sum_exp[(rows,)](x, row_max, row_sum, cols, x.stride(0), BLOCK=block, num_warps=4)
        _normalize[(rows, triton.cdiv(cols, block))](x, row_max, row_sum, y, cols, x.stride(0),
                                                      BLOCK=block, num_warps=4)
        return y
