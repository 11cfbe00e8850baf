"""Conv2d + BatchNorm (inference) + ReLU in bfloat16: the basic block of ResNets.

    y = relu((conv2d(x, W, stride, padding) - running_mean) / sqrt(running_var + eps) * gamma + beta)

Written as torchvision's ResNet writes it (nn.Conv2d without bias, nn.BatchNorm2d in eval mode,
ReLU), NCHW. A fused kernel folds the normalisation into a per-channel scale and shift applied to
the fp32 accumulator and writes the activated output once.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        # Default nn.Conv2d initialization, made in bf16; conv outputs have a variance of about 1/3.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                              bias=False, dtype=torch.bfloat16)
        self.bn = nn.BatchNorm2d(out_channels, eps=1e-5, dtype=torch.bfloat16)
        # Running statistics and affine parameters of a trained network (not the init's 0, 1, 1, 0).
        with torch.no_grad():
            self.bn.running_mean.copy_(0.2 * torch.randn(out_channels))
            self.bn.running_var.copy_((0.5 + torch.rand(out_channels)) / 3.0)
            self.bn.weight.copy_(1.0 + 0.5 * torch.randn(out_channels))
            self.bn.bias.copy_(0.5 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


def get_init_inputs(Ci, Co, k, s, p, **params):
    return [Ci, Co, k, s, p]


def get_inputs(N, Ci, H, W, **params):
    return [torch.randn(N, Ci, H, W, dtype=torch.bfloat16)]  # NCHW, contiguous
