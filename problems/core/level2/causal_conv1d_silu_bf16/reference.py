"""Causal depthwise conv1d + bias + SiLU in bfloat16: the short convolution of a Mamba block.

    y[b, d, t] = silu(bias[d] + sum_{j < k} w[d, j] * x[b, d, t - (k - 1) + j])     (x = 0 before t = 0)

Written as Mamba's reference path writes it: F.conv1d with groups = D and k - 1 zeros of padding on
both sides, the output cut back to the first L steps, then the SiLU. A fused kernel reads x once,
keeps the k - 1 previous steps of each channel at hand, and writes the activated y once.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        # Default nn.Conv1d initialization (weights and bias), made in bf16: mamba's conv1d layer.
        self.conv1d = nn.Conv1d(channels, channels, kernel_size, groups=channels, padding=kernel_size - 1,
                                bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        L = x.shape[-1]
        return F.silu(self.conv1d(x)[..., :L])


def get_init_inputs(D, k, **params):
    return [D, k]


def get_inputs(B, D, L, **params):
    # The in_proj output: (B, D, L), time contiguous (Mamba's layout for its conv).
    return [torch.randn(B, D, L, dtype=torch.bfloat16)]
