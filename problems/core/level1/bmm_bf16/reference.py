"""Batched bfloat16 matrix multiply: C[b] = A[b] @ B[b], float32 accumulation."""

import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_init_inputs(**params):
    return []


def get_inputs(Bt, M, K, N, **params):
    A = torch.randn(Bt, M, K, dtype=torch.bfloat16)
    B = torch.randn(Bt, K, N, dtype=torch.bfloat16).mul_(1.0 / math.sqrt(K))  # outputs of about unit size
    return [A, B]
