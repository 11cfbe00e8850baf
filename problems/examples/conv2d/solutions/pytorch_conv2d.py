"""PyTorch baseline without the convolution op: im2col with F.unfold, then one batched matrix
product of the (Cout, Cin*k*k) weight with the (Cin*k*k, Ho*Wo) columns of each image, plus the bias."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # Holds the parameters (conv.weight, conv.bias) so the reference's state_dict loads;
        # the module itself is never called.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1,
                              padding=kernel_size // 2, bias=True, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        k = self.conv.kernel_size[0]
        pad = k // 2
        ho, wo = h + 2 * pad - k + 1, w + 2 * pad - k + 1
        cout = self.conv.out_channels
        cols = F.unfold(x, kernel_size=k, padding=pad)           # (n, Cin*k*k, ho*wo)
        weight = self.conv.weight.reshape(cout, -1)               # (Cout, Cin*k*k)
        out = torch.matmul(weight, cols)                          # (n, Cout, ho*wo)
        out = out + self.conv.bias.view(1, cout, 1)
        return out.view(n, cout, ho, wo)
