"""Multi-head attention without a mask (encoder / diffusion self-attention), bf16 in and out:

    O = softmax(Q K^T / sqrt(D)) V      per (batch, head); Q, K, V, O of shape (B, H, L, D)
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_init_inputs(**params):
    return []


def get_inputs(B, H, L, D, **params):
    return [torch.randn(B, H, L, D, dtype=torch.bfloat16) for _ in range(3)]
