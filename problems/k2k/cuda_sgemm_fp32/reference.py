"""float32 matrix multiply in IEEE single precision (TF32 off): C = A @ B, A (M, K), B (K, N), row-major."""

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
    # B scaled by 1/sqrt(K): entries of C are of about unit size
    A = torch.randn(M, K, dtype=torch.float32)
    B = torch.randn(K, N, dtype=torch.float32) / math.sqrt(K)
    return [A, B]
