"""Row sum in Triton: one program per row, summing chunks of BLOCK columns into a vector of
float32 partial sums that is reduced once at the end (any N works)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _row_sum(x_ptr, y_ptr, n_cols, x_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    offsets = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty((rows,), dtype=torch.float32, device=x.device)
        if rows == 0:
            return y
        if cols == 0:
            return y.zero_()
        limit = 4096 if x.is_cuda else 1024
        block = min(triton.next_power_of_2(cols), limit)
        warps = 8 if block >= 2048 else 4
        _row_sum[(rows,)](x, y, cols, x.stride(0), BLOCK=block, num_warps=warps)
        return y
