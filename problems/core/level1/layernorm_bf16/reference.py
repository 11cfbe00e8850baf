"""LayerNorm over the last dimension, bfloat16 in and out (float32 statistics inside torch's op)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, N: int):
        super().__init__()
        self.ln = nn.LayerNorm(N, eps=1e-5, elementwise_affine=True, bias=True, dtype=torch.bfloat16)
        # Away from the default (ones, zeros), so that a kernel ignoring the affine part fails.
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(N))
            self.ln.bias.copy_(0.5 * torch.randn(N))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_init_inputs(N, **params):
    return [N]


def get_inputs(B, N, **params):
    return [(torch.randn(B, N) * 2.0 + 0.5).to(torch.bfloat16)]
