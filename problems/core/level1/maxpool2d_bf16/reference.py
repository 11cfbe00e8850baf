"""2-D max pooling, NCHW, bfloat16: nn.MaxPool2d(Kk, stride=S, padding=P)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, Kk: int, S: int, P: int):
        super().__init__()
        self.pool = nn.MaxPool2d(Kk, stride=S, padding=P)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_init_inputs(Kk, S, P, **params):
    return [Kk, S, P]


def get_inputs(N, C, H, W, **params):
    return [torch.randn(N, C, H, W, dtype=torch.bfloat16)]
