"""Linear + bias + GELU (tanh approximation) in bfloat16: the MLP up projection of GPT-2 / GPT-J.

    y = gelu_tanh(x @ W^T + b)
    gelu_tanh(h) = 0.5 * h * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 * h^3)))

Written as the two ops a user writes: the linear layer (whose bf16 output is materialised) and the
activation. A fused kernel applies the bias and the GELU to the fp32 accumulator and writes y once.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Default nn.Linear initialization (uniform in +-1/sqrt(in_features)), made in bf16.
        self.fc_in = nn.Linear(in_features, out_features, bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc_in(x), approximate="tanh")


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    # Hidden states of about unit size (after the block's LayerNorm in the real model).
    return [torch.randn(M, K, dtype=torch.bfloat16)]
