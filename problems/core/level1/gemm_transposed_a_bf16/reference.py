"""Weight gradient of a linear layer in bfloat16: dW = dY^T @ X, dY (T, N), X (T, K) row-major."""

import math

import torch
from torch import nn


def _fp32_reduction(matmul, *args):
    """Run a cuBLAS bfloat16 product with float32 accumulation end to end. By default
    (torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction) cuBLAS may split K and add
    the partial sums in bfloat16: on an H100 that made the reference miss a float64 product rounded
    to bfloat16 by up to 1.03x the tolerance (gemm_bf16's odd 3071 x 4093 x 5119 shape; 0.52-0.63x
    with float32 reduction, at the same speed). The flag is restored afterwards."""
    flags = torch.backends.cuda.matmul
    before = flags.allow_bf16_reduced_precision_reduction
    flags.allow_bf16_reduced_precision_reduction = False
    try:
        return matmul(*args)
    finally:
        flags.allow_bf16_reduced_precision_reduction = before


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, dY: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        return _fp32_reduction(torch.matmul, dY.t(), X)  # (N, K), float32 accumulation over T


def get_init_inputs(**params):
    return []


def get_inputs(T, N, K, **params):
    dY = torch.randn(T, N, dtype=torch.bfloat16)
    X = torch.randn(T, K, dtype=torch.bfloat16).mul_(1.0 / math.sqrt(T))  # outputs of about unit size
    return [dY, X]
