"""Weight gradient of a linear layer in bfloat16: dW = dY^T @ X, dY (T, N), X (T, K) row-major."""

import math

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, dY: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        return torch.matmul(dY.t(), X)  # (N, K), float32 accumulation over T


def get_init_inputs(**params):
    return []


def get_inputs(T, N, K, **params):
    dY = torch.randn(T, N, dtype=torch.bfloat16)
    X = torch.randn(T, K, dtype=torch.bfloat16).mul_(1.0 / math.sqrt(T))  # outputs of about unit size
    return [dY, X]
