"""SwiGLU activation of a fused gate/up projection (vLLM's SiluAndMul), bf16 in and out.

    y[t, i] = bf16(silu(g[t, i]) * u[t, i]),  g = h[:, :I], u = h[:, I:],  silu(g) = g / (1 + exp(-g))

computed in float32 from the bf16 inputs and rounded once.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        inter = h.shape[-1] // 2
        gate = h[:, :inter].float()
        up = h[:, inter:].float()
        return (F.silu(gate) * up).to(torch.bfloat16)


def get_init_inputs(**params):
    return []


def get_inputs(T, I, **params):
    # gate and up projections of spread 2: silu's negative lobe and its linear part both matter
    return [(torch.randn(T, 2 * I) * 2.0).to(torch.bfloat16)]
