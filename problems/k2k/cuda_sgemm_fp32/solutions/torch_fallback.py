"""Lazy on purpose: computes the result with torch.matmul instead of a CUDA kernel, which this
kernel-to-kernel task forbids, so it must be rejected."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)
