"""ConvTranspose2d (4x4, stride 2, padding 1) + BatchNorm (inference) + ReLU in bfloat16: the
upsampling block of DCGAN's generator and of pix2pix's U-Net decoder.

    y = relu(bn(conv_transpose2d(x, W, stride=2, padding=1)))        (H x W -> 2H x 2W)

Written as the modules a user writes, NCHW, BatchNorm in eval mode. A fused kernel computes each
output phase of the transposed convolution (a 2x2 sub-kernel per output parity) with the scale and
shift of the BatchNorm and the ReLU applied to the fp32 accumulator, and writes the output once.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        # Default nn.ConvTranspose2d initialization, made in bf16; no bias (a BatchNorm follows).
        self.up = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1, bias=False,
                                     dtype=torch.bfloat16)
        self.bn = nn.BatchNorm2d(out_channels, eps=1e-5, dtype=torch.bfloat16)
        # Running statistics and affine parameters of a trained network (not the init's 0, 1, 1, 0).
        # The default init (bound 1/sqrt(Co * 16)) and unit inputs give outputs of variance about
        # Ci / (12 * Co) (4 taps reach each output).
        var = in_channels / (12.0 * out_channels)
        with torch.no_grad():
            self.bn.running_mean.copy_(0.2 * var ** 0.5 * torch.randn(out_channels))
            self.bn.running_var.copy_((0.5 + torch.rand(out_channels)) * var)
            self.bn.weight.copy_(1.0 + 0.5 * torch.randn(out_channels))
            self.bn.bias.copy_(0.5 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.up(x)))


def get_init_inputs(Ci, Co, **params):
    return [Ci, Co]


def get_inputs(N, Ci, H, W, **params):
    return [torch.randn(N, Ci, H, W, dtype=torch.bfloat16)]  # NCHW, contiguous
