"""3-D convolution, NCDHW, bfloat16: nn.Conv3d(Cin, Cout, (Kd, Kh, Kh), stride=(Sd, Sh, Sh),
padding=(Pd, Ph, Ph), bias=True)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, Cin: int, Cout: int, Kd: int, Kh: int, Sd: int, Sh: int, Pd: int, Ph: int):
        super().__init__()
        self.conv = nn.Conv3d(Cin, Cout, (Kd, Kh, Kh), stride=(Sd, Sh, Sh), padding=(Pd, Ph, Ph),
                              bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_init_inputs(Cin, Cout, Kd, Kh, Sd, Sh, Pd, Ph, **params):
    return [Cin, Cout, Kd, Kh, Sd, Sh, Pd, Ph]


def get_inputs(N, Cin, D, H, W, **params):
    return [torch.randn(N, Cin, D, H, W, dtype=torch.bfloat16)]
