"""bf16 linear layer without bias: y = x @ W^T, with x (M, K), W (N, K) (nn.Linear's layout) and a
bf16 output y (M, N), accumulated in float32."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        # entries ~ N(0, 1/K): outputs of about unit size for unit-variance x
        w = torch.randn(N, K) / math.sqrt(K)
        self.weight = nn.Parameter(w.to(torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    return [torch.randn(M, K, dtype=torch.bfloat16)]
