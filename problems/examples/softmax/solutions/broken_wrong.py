"""Broken on purpose: it runs, but normalizes over the batch dimension instead of the last one."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x - x.amax(dim=0, keepdim=True))
        return e / e.sum(dim=0, keepdim=True)
