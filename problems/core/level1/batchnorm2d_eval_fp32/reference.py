"""BatchNorm2d in inference mode (running statistics) on NCHW float32 feature maps."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, C: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(C, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                                 dtype=torch.float32)
        # Running statistics and affine parameters of a trained layer, away from the defaults
        # (mean 0, var 1, weight 1, bias 0), so that a kernel ignoring any of them fails.
        with torch.no_grad():
            self.bn.running_mean.copy_(0.5 * torch.randn(C))
            self.bn.running_var.copy_(0.5 + 1.5 * torch.rand(C))
            self.bn.weight.copy_(1.0 + 0.5 * torch.randn(C))
            self.bn.bias.copy_(0.5 * torch.randn(C))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_init_inputs(C, **params):
    return [C]


def get_inputs(N, C, H, W, **params):
    return [torch.randn(N, C, H, W, dtype=torch.float32) * 2.0 + 0.5]
