"""Half-precision matrix multiply: C = A @ B, float16 in and out."""

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
    # B is scaled by 1/sqrt(K) so that C has entries of about unit size, well inside float16.
    A = torch.randn(M, K, dtype=torch.float32).to(torch.float16)
    B = (torch.randn(K, N, dtype=torch.float32) / math.sqrt(K)).to(torch.float16)
    return [A, B]
