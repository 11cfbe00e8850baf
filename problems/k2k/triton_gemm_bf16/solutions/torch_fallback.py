"""Lazy on purpose: computes the result with torch.nn.functional.linear instead of a Triton kernel,
which this kernel-to-kernel task forbids, so it must be rejected."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(N, K, dtype=torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)
