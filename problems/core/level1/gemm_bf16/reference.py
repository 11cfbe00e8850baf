"""bfloat16 matrix multiply: C = A @ B, A (M, K) and B (K, N) row-major, float32 accumulation."""

import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_init_inputs(**params):
    return []


def get_inputs(M, K, N, **params):
    A = torch.randn(M, K, dtype=torch.bfloat16)
    B = torch.randn(K, N, dtype=torch.bfloat16).mul_(1.0 / math.sqrt(K))  # outputs of about unit size
    return [A, B]
