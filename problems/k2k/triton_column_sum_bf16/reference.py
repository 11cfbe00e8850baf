"""Column sum of a bf16 matrix into float32 (the bias gradient of a linear layer): db[n] = sum_t dy[t, n]."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, dy: torch.Tensor) -> torch.Tensor:
        return torch.sum(dy, dim=0, dtype=torch.float32)


def get_init_inputs(**params):
    return []


def get_inputs(T, N, **params):
    return [torch.randn(T, N, dtype=torch.bfloat16)]
