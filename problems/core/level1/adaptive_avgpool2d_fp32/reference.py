"""2-D adaptive average pooling, NCHW, float32: nn.AdaptiveAvgPool2d((OH, OW))."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, OH: int, OW: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((OH, OW))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_init_inputs(OH, OW, **params):
    return [OH, OW]


def get_inputs(N, C, H, W, **params):
    return [torch.randn(N, C, H, W, dtype=torch.float32) * 2.0 + 0.5]
