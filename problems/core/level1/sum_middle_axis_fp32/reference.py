"""Sum over the middle axis of a 3-D float32 tensor: y = x.sum(dim=1)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_init_inputs(**params):
    return []


def get_inputs(A, R, C, **params):
    return [torch.randn(A, R, C, dtype=torch.float32) * 2.0 + 0.5]
