"""1-D convolution, NCL, bfloat16: nn.Conv1d(Cin, Cout, Kw, stride=S, padding=P, bias=True)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, Cin: int, Cout: int, Kw: int, S: int, P: int):
        super().__init__()
        self.conv = nn.Conv1d(Cin, Cout, Kw, stride=S, padding=P, bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_init_inputs(Cin, Cout, Kw, S, P, **params):
    return [Cin, Cout, Kw, S, P]


def get_inputs(N, Cin, L, **params):
    return [torch.randn(N, Cin, L, dtype=torch.bfloat16)]
