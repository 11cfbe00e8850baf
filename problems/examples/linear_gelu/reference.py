"""Linear + GELU: y = gelu(x @ W^T + b) in float16, with the exact (erf) GELU."""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Default nn.Linear initialization (uniform in +-1/sqrt(in_features)), made in float16.
        self.linear = nn.Linear(in_features, out_features, bias=True, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x), approximate="none")


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    return [torch.randn(M, K, dtype=torch.float32).to(torch.float16)]
