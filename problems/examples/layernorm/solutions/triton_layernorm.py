"""LayerNorm in Triton: one program per row, three passes over the row in chunks of BLOCK
columns (mean, then the variance around the mean, then normalize), so any N works and the
variance does not suffer from the cancellation of E[x^2] - E[x]^2."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _layernorm_rows(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offsets = tl.arange(0, BLOCK)

    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        acc += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols

    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)

    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        # Holds the parameters (ln.weight, ln.bias) so the reference's state_dict loads; never called.
        self.ln = nn.LayerNorm(hidden_size, eps=1e-5, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
        if rows == 0 or cols == 0:
            return y
        limit = 4096 if x.is_cuda else 1024
        block = min(triton.next_power_of_2(cols), limit)
        warps = 8 if block >= 2048 else 4
        _layernorm_rows[(rows,)](x, self.ln.weight.contiguous(), self.ln.bias.contiguous(), y, cols,
                                 x.stride(0), y.stride(0), self.ln.eps, BLOCK=block, num_warps=warps)
        return y
