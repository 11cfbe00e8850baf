"""Broken on purpose: the im2col convolution reshapes its result to one row too many, so forward
raises a RuntimeError (shape mismatch) on every shape."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1,
                              padding=kernel_size // 2, bias=True, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        k = self.conv.kernel_size[0]
        pad = k // 2
        cout = self.conv.out_channels
        cols = F.unfold(x, kernel_size=k, padding=pad)
        out = torch.matmul(self.conv.weight.reshape(cout, -1), cols)
        out = out + self.conv.bias.view(1, cout, 1)
        ho, wo = h + 2 * pad - k + 1, w + 2 * pad - k + 1
        return out.view(n, cout, ho + 1, wo)  # wrong: Ho + 1 rows -> size mismatch
