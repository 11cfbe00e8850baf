"""Decode-time linear layer in bfloat16: y = x @ W^T, x (M, K) with M = 1..16, W (N, K) a parameter."""

import torch
from torch import nn
from torch.nn import functional as F


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
    def __init__(self, K: int, N: int):
        super().__init__()
        # nn.Linear's weight (N, K), default init (uniform in +-1/sqrt(K)): outputs of about 0.6.
        self.proj = nn.Linear(K, N, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _fp32_reduction(F.linear, x, self.proj.weight)


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    return [torch.randn(M, K, dtype=torch.bfloat16)]
