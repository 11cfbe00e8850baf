"""Transposed 2-D convolution, NCHW, bfloat16: nn.ConvTranspose2d(Cin, Cout, Kk, stride=S,
padding=P, output_padding=OP, bias=True)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, Cin: int, Cout: int, Kk: int, S: int, P: int, OP: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(Cin, Cout, Kk, stride=S, padding=P, output_padding=OP,
                                       bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_init_inputs(Cin, Cout, Kk, S, P, OP, **params):
    return [Cin, Cout, Kk, S, P, OP]


def get_inputs(N, Cin, H, W, **params):
    return [torch.randn(N, Cin, H, W, dtype=torch.bfloat16)]
