"""Batched bfloat16 matrix multiply: C[b] = A[b] @ B[b], float32 accumulation."""

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

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _fp32_reduction(torch.bmm, A, B)


def get_init_inputs(**params):
    return []


def get_inputs(Bt, M, K, N, **params):
    A = torch.randn(Bt, M, K, dtype=torch.bfloat16)
    B = torch.randn(Bt, K, N, dtype=torch.bfloat16).mul_(1.0 / math.sqrt(K))  # outputs of about unit size
    return [A, B]
