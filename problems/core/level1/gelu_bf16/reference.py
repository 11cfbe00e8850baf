"""GELU with the tanh approximation, elementwise on bfloat16 (float32 math inside torch's op)."""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_init_inputs(**params):
    return []


def get_inputs(T, N, **params):
    return [(torch.randn(T, N) * 2.0 + 0.5).to(torch.bfloat16)]
