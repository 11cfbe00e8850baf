"""Causal scaled dot-product attention, bfloat16, head dim 128: F.scaled_dot_product_attention(
Q, K, V, is_causal=True) with Q, K, V (B, H, S, D)."""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_init_inputs(**params):
    return []


def get_inputs(B, H, S, D, **params):
    q = torch.randn(B, H, S, D, dtype=torch.bfloat16)
    k = torch.randn(B, H, S, D, dtype=torch.bfloat16)
    v = torch.randn(B, H, S, D, dtype=torch.bfloat16)
    return [q, k, v]
