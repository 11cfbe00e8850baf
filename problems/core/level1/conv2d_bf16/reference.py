"""2-D convolution, NCHW, bfloat16: nn.Conv2d(Cin, Cout, Kk, stride=S, padding=P, bias=False)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, Cin: int, Cout: int, Kk: int, S: int, P: int):
        super().__init__()
        self.conv = nn.Conv2d(Cin, Cout, Kk, stride=S, padding=P, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_init_inputs(Cin, Cout, Kk, S, P, **params):
    return [Cin, Cout, Kk, S, P]


def get_inputs(N, Cin, H, W, **params):
    return [torch.randn(N, Cin, H, W, dtype=torch.bfloat16)]
