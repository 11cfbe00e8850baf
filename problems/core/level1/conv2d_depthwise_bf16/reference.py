"""Depthwise 2-D convolution, NCHW, bfloat16: nn.Conv2d(C, C, Kk, stride=S, padding=Kk // 2,
groups=C, bias=True)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, C: int, Kk: int, S: int):
        super().__init__()
        self.conv = nn.Conv2d(C, C, Kk, stride=S, padding=Kk // 2, groups=C, bias=True,
                              dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_init_inputs(C, Kk, S, **params):
    return [C, Kk, S]


def get_inputs(N, C, H, W, **params):
    return [torch.randn(N, C, H, W, dtype=torch.bfloat16)]
