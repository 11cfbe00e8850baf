"""Inclusive prefix sum along the last dimension of a 2-D float32 tensor: y[b, i] = sum_{j <= i} x[b, j]."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_init_inputs(**params):
    return []


def get_inputs(B, N, **params):
    # non-negative entries (probabilities before normalization, say): prefix sums grow steadily,
    # so any float32 accumulation order stays far inside the tolerance
    return [torch.rand(B, N, dtype=torch.float32)]
