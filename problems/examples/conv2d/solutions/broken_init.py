"""Broken on purpose: the constructor raises, so the evaluation must report an init error."""

from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        raise ValueError(f"refusing to build a {kernel_size}x{kernel_size} convolution (broken on purpose)")

    def forward(self, x):
        return x
