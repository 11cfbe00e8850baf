"""LayerNorm + Linear in bfloat16: a pre-norm Transformer's normalised input projection.

    y = LayerNorm(x) @ W^T + b       (LayerNorm over the last dimension, eps 1e-5, affine)

This is GPT-2's ln_1 followed by c_attn (the fused QKV projection) or a ViT block's norm1 followed
by qkv, written as the two ops a user writes: the normalised activations (M, K) are materialised in
bf16 and read back by the GEMM. A fused kernel normalises rows of x as it loads the GEMM's A tiles
(after a pass for each row's mean and variance), so the normalised copy never goes to memory.
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.norm = nn.LayerNorm(in_features, eps=1e-5, dtype=torch.bfloat16)
        # Default nn.Linear initialization (uniform in +-1/sqrt(in_features)), made in bf16.
        self.proj = nn.Linear(in_features, out_features, bias=True, dtype=torch.bfloat16)
        # Away from the default (ones, zeros), so that a kernel ignoring the affine part fails.
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(in_features))
            self.norm.bias.copy_(0.5 * torch.randn(in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x))


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    # The residual stream: per-row offsets and scales, so that both the mean and the variance matter.
    x = torch.randn(M, K) * (1.0 + torch.rand(M, 1)) + torch.randn(M, 1)
    return [x.to(torch.bfloat16)]
