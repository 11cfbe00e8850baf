"""Lazy on purpose: computes the result with torch.nn.functional.conv2d instead of a CUDA kernel,
which this kernel-to-kernel task forbids, so it must be rejected."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, C: int, KS: int):
        super().__init__()
        self.conv = nn.Module()
        self.conv.weight = nn.Parameter(torch.empty(C, 1, KS, KS, dtype=torch.bfloat16), requires_grad=False)
        self.conv.bias = nn.Parameter(torch.empty(C, dtype=torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ks = self.conv.weight.shape[-1]
        return F.conv2d(x, self.conv.weight, self.conv.bias, padding=ks // 2, groups=x.shape[1])
