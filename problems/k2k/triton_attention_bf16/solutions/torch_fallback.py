"""Lazy on purpose: computes the result with torch's scaled_dot_product_attention instead of
Triton kernels, which this kernel-to-kernel task forbids, so it must be rejected."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)
