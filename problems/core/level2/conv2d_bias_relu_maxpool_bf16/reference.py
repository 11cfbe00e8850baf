"""Conv2d 3x3 + bias + ReLU + 2x2 max-pool in bfloat16: the end of a VGG block.

    y = maxpool_2x2(relu(conv3x3(x, W, padding=1) + b))

Written as torchvision's VGG writes it (nn.Conv2d, ReLU, nn.MaxPool2d(2, 2)), NCHW. A fused kernel
computes the full-resolution convolution tile, applies the bias and the ReLU and pools it before
writing: only a quarter of the activations ever reach memory.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        # Default nn.Conv2d initialization (weights and bias), made in bf16.
        self.conv = nn.Conv2d(in_channels, out_channels, 3, stride=1, padding=1, bias=True,
                              dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(F.relu(self.conv(x)), kernel_size=2, stride=2)


def get_init_inputs(Ci, Co, **params):
    return [Ci, Co]


def get_inputs(N, Ci, H, W, **params):
    return [torch.randn(N, Ci, H, W, dtype=torch.bfloat16)]  # NCHW, contiguous
