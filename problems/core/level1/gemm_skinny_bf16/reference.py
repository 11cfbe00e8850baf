"""Decode-time linear layer in bfloat16: y = x @ W^T, x (M, K) with M = 1..16, W (N, K) a parameter."""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        # nn.Linear's weight (N, K), default init (uniform in +-1/sqrt(K)): outputs of about 0.6.
        self.proj = nn.Linear(K, N, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.proj.weight)


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    return [torch.randn(M, K, dtype=torch.bfloat16)]
