"""RMSNorm (Llama style) over the last dimension, bfloat16 in and out, float32 math."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, N: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        # Away from ones, so that a kernel ignoring the weight fails.
        self.weight = nn.Parameter((1.0 + 0.5 * torch.randn(N)).to(torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * inv_rms * self.weight.float()).to(torch.bfloat16)


def get_init_inputs(N, **params):
    return [N]


def get_inputs(B, N, **params):
    return [(torch.randn(B, N) * 2.0 + 0.5).to(torch.bfloat16)]
