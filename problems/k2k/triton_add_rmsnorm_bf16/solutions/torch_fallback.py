"""Lazy on purpose: computes the result with torch ops instead of Triton kernels, which this
kernel-to-kernel task forbids, so it must be rejected."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = (x.float() + residual.float()).to(torch.bfloat16)
        y = torch.nn.functional.rms_norm(h.float(), (h.shape[-1],), self.weight.float(), eps=1e-6)
        return y.to(torch.bfloat16), h
