"""Broken on purpose: calls torch.matmul, which this problem forbids, so it must be rejected."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)
