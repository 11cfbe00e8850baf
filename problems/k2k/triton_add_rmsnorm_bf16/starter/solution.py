"""Starter: residual add + RMSNorm in Triton as three kernels, correct but slow.

1. `_add`: h = bf16(x + residual), elementwise over the flattened tensors; h is written out.
2. `_row_rstd`: one program per row reads h back in chunks of 1024 and writes
   rstd = rsqrt(mean(h^2) + eps) to a per-row float32 buffer.
3. `_scale`: one program per (row, chunk) reads h a second time and writes y = bf16(h * rstd * w).

h goes through memory three times (written once, read twice) where a fused kernel would write it
once and read nothing back.
"""

import torch
import triton
import triton.language as tl
from torch import nn

EPS = 1e-6


@triton.jit
def _to_bf16(x, INTERPRET: tl.constexpr):
    # Triton's CPU interpreter truncates fp32 -> bf16 casts: round to nearest even there first.
    if INTERPRET:
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        x = bits.to(tl.float32, bitcast=True)
    return x.to(tl.bfloat16)


@triton.jit
def _add(x_ptr, r_ptr, h_ptr, n, BLOCK: tl.constexpr, INTERPRET: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(h_ptr + offs, _to_bf16(x + r, INTERPRET), mask=mask)


@triton.jit
def _row_rstd(h_ptr, rstd_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        h = tl.load(h_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += h * h
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps))


@triton.jit
def _scale(h_ptr, w_ptr, rstd_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, INTERPRET: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    rstd = tl.load(rstd_ptr + row)
    h = tl.load(h_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, _to_bf16(h * rstd * w, INTERPRET), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        # the reference's parameter (weight, (N,) bf16): its values are loaded in
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        x = x.contiguous()
        residual = residual.contiguous()
        rows, cols = x.shape
        interpret = not x.is_cuda
        h = torch.empty((rows, cols), dtype=torch.bfloat16, device=x.device)
        y = torch.empty((rows, cols), dtype=torch.bfloat16, device=x.device)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        n = rows * cols
        block = 1024
        _add[(triton.cdiv(n, block),)](x, residual, h, n, BLOCK=block, INTERPRET=interpret, num_warps=4)
        _row_rstd[(rows,)](h, rstd, cols, EPS, BLOCK=block, num_warps=4)
        _scale[(rows, triton.cdiv(cols, block))](h, self.weight, rstd, y, cols, BLOCK=block,
                                                  INTERPRET=interpret, num_warps=4)
        return y, h
