"""Depthwise 2-D convolution (ConvNeXt's token mixer), bf16, NCHW, stride 1, 'same' zero padding:

    y[n, c, h, w] = bias[c] + sum_{i, j < KS} x[n, c, h + i - KS//2, w + j - KS//2] * weight[c, 0, i, j]
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, C: int, KS: int):
        super().__init__()
        # nn.Conv2d's own init: weights and bias uniform in +-1/KS
        self.conv = nn.Conv2d(C, C, KS, padding=KS // 2, groups=C, bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_init_inputs(C, KS, **params):
    return [C, KS]


def get_inputs(B, C, H, W, **params):
    return [torch.randn(B, C, H, W, dtype=torch.bfloat16)]
