"""GroupNorm over NCHW float32 feature maps: nn.GroupNorm(G, C, eps=1e-5, affine=True)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, G: int, C: int):
        super().__init__()
        self.gn = nn.GroupNorm(G, C, eps=1e-5, affine=True, dtype=torch.float32)
        # Away from the default (ones, zeros), so that a kernel ignoring the affine part fails.
        with torch.no_grad():
            self.gn.weight.copy_(1.0 + 0.5 * torch.randn(C))
            self.gn.bias.copy_(0.5 * torch.randn(C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_init_inputs(G, C, **params):
    return [G, C]


def get_inputs(N, C, H, W, **params):
    return [torch.randn(N, C, H, W, dtype=torch.float32) * 2.0 + 0.5]
