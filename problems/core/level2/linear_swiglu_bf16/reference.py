"""Gate and up projections + SwiGLU in bfloat16: the first half of a Llama-style MLP.

    y = silu(x @ W_gate^T) * (x @ W_up^T),    silu(g) = g * sigmoid(g)

Written as a user writes it (Hugging Face LlamaMLP without the down projection): two bias-free
linear layers whose bf16 outputs are materialised, the SiLU and the product. A fused kernel computes
both projections of a tile, combines them in registers and writes y once.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        # Default nn.Linear initialization (uniform in +-1/sqrt(hidden_size)), made in bf16.
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False, dtype=torch.bfloat16)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.gate_proj(x)) * self.up_proj(x)


def get_init_inputs(H, I, **params):
    return [H, I]


def get_inputs(M, H, **params):
    # RMS-normalised hidden states: entries of about unit size.
    return [torch.randn(M, H, dtype=torch.bfloat16)]
