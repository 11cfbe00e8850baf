"""2-D convolution, NCHW, float32: nn.Conv2d(Cin, Cout, k, stride=1, padding=k // 2, bias=True)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1,
                              padding=kernel_size // 2, bias=True, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_init_inputs(Cin, Cout, k, **params):
    return [Cin, Cout, k]


def get_inputs(N, Cin, H, W, **params):
    return [torch.randn(N, Cin, H, W, dtype=torch.float32)]
