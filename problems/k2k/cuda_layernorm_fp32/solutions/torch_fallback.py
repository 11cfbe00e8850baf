"""Lazy on purpose: computes the result with torch.nn.functional.layer_norm instead of a CUDA
kernel, which this kernel-to-kernel task forbids, so it must be rejected."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.ln = nn.Module()
        self.ln.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.float32), requires_grad=False)
        self.ln.bias = nn.Parameter(torch.empty(hidden_size, dtype=torch.float32), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.ln.weight, self.ln.bias, eps=1e-5)
