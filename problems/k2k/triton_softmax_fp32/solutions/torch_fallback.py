"""Lazy on purpose: computes the result with torch.softmax instead of Triton kernels, which this
kernel-to-kernel task forbids, so it must be rejected."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)
