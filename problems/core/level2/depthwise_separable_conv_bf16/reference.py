"""Depthwise-separable convolution block (MobileNetV1, BatchNorm folded for inference), bfloat16:

    t = relu(depthwise_conv3x3(x, stride s, padding 1) + b_dw)      (C channels, one 3x3 filter each)
    y = relu(pointwise_conv1x1(t) + b_pw)                            (C -> Co channels)

At inference each BatchNorm is folded into the convolution before it (scale into the weights, shift
into a bias), as deployment tools do. NCHW. Written as the separate modules a user writes, the
intermediate t (N, C, Ho, Wo) makes a round trip through memory; a fused kernel computes the
depthwise tile in registers or shared memory and feeds it straight into the pointwise GEMM.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, channels: int, out_channels: int, stride: int):
        super().__init__()
        # Default nn.Conv2d initializations (weights and biases), made in bf16.
        self.dw = nn.Conv2d(channels, channels, 3, stride=stride, padding=1, groups=channels, bias=True,
                            dtype=torch.bfloat16)
        self.pw = nn.Conv2d(channels, out_channels, 1, bias=True, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = F.relu(self.dw(x))
        return F.relu(self.pw(t))


def get_init_inputs(C, Co, s, **params):
    return [C, Co, s]


def get_inputs(N, C, H, W, **params):
    return [torch.randn(N, C, H, W, dtype=torch.bfloat16)]  # NCHW, contiguous
