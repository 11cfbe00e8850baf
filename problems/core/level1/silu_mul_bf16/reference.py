"""SwiGLU activation on a fused gate/up projection: y = silu(x[:, :I]) * x[:, I:], bfloat16."""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        I = x.shape[-1] // 2
        return F.silu(x[:, :I]) * x[:, I:]


def get_init_inputs(**params):
    return []


def get_inputs(T, I, **params):
    return [(torch.randn(T, 2 * I) * 2.0 + 0.5).to(torch.bfloat16)]
