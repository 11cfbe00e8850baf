"""Residual add fused with RMSNorm (vLLM's fused_add_rms_norm), bf16 in and out.

    h = bf16(x + residual)                                (the new residual stream)
    y = bf16(h * rsqrt(mean(h^2) + eps) * weight)         (mean over the last dimension, in float32)

Both outputs are returned: y feeds the next layer, h is the residual for the layer after it.
"""

import torch
from torch import nn

EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        # Away from ones, so that a kernel ignoring the weight fails.
        w = 1.0 + 0.5 * torch.randn(hidden_size)
        self.weight = nn.Parameter(w.to(torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = (x.float() + residual.float()).to(torch.bfloat16)
        hf = h.float()
        rstd = torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + EPS)
        y = (hf * rstd * self.weight.float()).to(torch.bfloat16)
        return y, h


def get_init_inputs(N, **params):
    return [N]


def get_inputs(B, N, **params):
    # a layer's output (non-zero mean) and a residual stream of larger spread
    x = (torch.randn(B, N) + 0.5).to(torch.bfloat16)
    residual = (torch.randn(B, N) * 2.0).to(torch.bfloat16)
    return [x, residual]
