"""The ResNet block of a diffusion UNet (Stable Diffusion's ResnetBlock2D), inference, bfloat16, NCHW.

    h = conv1(silu(norm1(x)))                         norm1: GroupNorm(32, Cin, eps 1e-5)
    h = h + time_emb_proj(silu(temb))[:, :, None, None]
    h = conv2(silu(norm2(h)))                         norm2: GroupNorm(32, Cout, eps 1e-5)
    y = shortcut(x) + h

x (N, Cin, H, W) and the timestep embedding temb (N, Ct) are bfloat16. conv1 (Cin -> Cout) and conv2
(Cout -> Cout) are 3x3 convolutions with padding 1 and biases; time_emb_proj an nn.Linear (Ct ->
Cout) with bias; shortcut a 1x1 convolution with bias when Cin != Cout, else the identity.
GroupNorm normalises each group of C/32 channels over (channels, H, W) with the biased variance,
then applies a per-channel weight and bias. Dropout (p = 0 at inference) is omitted. Every
parameter is bfloat16 and each layer's output is rounded to bfloat16, as a bf16 model runs it.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, Cin: int, Cout: int, Ct: int):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, Cin, eps=1e-5)
        self.conv1 = nn.Conv2d(Cin, Cout, 3, padding=1)
        self.time_emb_proj = nn.Linear(Ct, Cout)
        self.norm2 = nn.GroupNorm(32, Cout, eps=1e-5)
        self.conv2 = nn.Conv2d(Cout, Cout, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(Cin, Cout, 1) if Cin != Cout else None
        with torch.no_grad():
            # weights ~ N(0, 1/fan_in), biases ~ 0.1 N(0, 1): each branch of about unit size
            for layer in (self.conv1, self.time_emb_proj, self.conv2, self.conv_shortcut):
                if layer is None:
                    continue
                fan_in = layer.weight[0].numel()
                layer.weight.copy_(torch.randn(layer.weight.shape) / math.sqrt(fan_in))
                layer.bias.copy_(0.1 * torch.randn(layer.bias.shape))
            for norm in (self.norm1, self.norm2):  # away from ones and zeros
                norm.weight.copy_(1.0 + 0.3 * torch.randn(norm.num_channels))
                norm.bias.copy_(0.3 * torch.randn(norm.num_channels))
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.time_emb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        shortcut = x if self.conv_shortcut is None else self.conv_shortcut(x)
        return shortcut + h


def get_init_inputs(Cin, Cout, Ct, **params):
    return [Cin, Cout, Ct]


def get_inputs(N, Cin, H, W, Ct, **params):
    # a feature map with per-channel offsets (GroupNorm's mean matters) and a timestep embedding
    x = torch.randn(N, Cin, H, W) + 0.5 * torch.randn(1, Cin, 1, 1)
    temb = torch.randn(N, Ct)
    return [x.to(torch.bfloat16), temb.to(torch.bfloat16)]
