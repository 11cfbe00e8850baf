"""Llama-style SwiGLU MLP in bfloat16: y = down_proj(silu(gate_proj(x)) * up_proj(x)).

x is (T, H), the tokens of a batch flattened; gate_proj and up_proj are (I, H) weights and
down_proj an (H, I) weight, as nn.Linear stores them (y = x @ W^T), without biases. Each product
accumulates in float32 and is rounded to bfloat16, as a bf16 model in PyTorch runs it.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, H: int, I: int):
        super().__init__()
        self.gate_proj = nn.Linear(H, I, bias=False, dtype=torch.bfloat16)
        self.up_proj = nn.Linear(H, I, bias=False, dtype=torch.bfloat16)
        self.down_proj = nn.Linear(I, H, bias=False, dtype=torch.bfloat16)
        # Entries ~ N(0, 1/fan_in): the gate and up projections and the output are of about unit
        # size (nn.Linear's own init would make them ~0.3x smaller), like a trained layer's.
        with torch.no_grad():
            for layer in (self.gate_proj, self.up_proj, self.down_proj):
                w = torch.randn(layer.weight.shape, dtype=torch.bfloat16)
                layer.weight.copy_(w.mul_(1.0 / math.sqrt(layer.in_features)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def get_init_inputs(H, I, **params):
    return [H, I]


def get_inputs(T, H, **params):
    return [torch.randn(T, H, dtype=torch.bfloat16)]
