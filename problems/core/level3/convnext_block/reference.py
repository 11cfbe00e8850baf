"""ConvNeXt block (torchvision's CNBlock), inference, bfloat16, NCHW in and out.

    t = dwconv(x)                                   7x7 depthwise, padding 3, bias
    t = t.permute(0, 2, 3, 1)                       (N, H, W, C)
    t = pwconv2(gelu(pwconv1(norm(t))))             LayerNorm(C, eps 1e-6); C -> 4C -> C
    y = x + (gamma * t).permute(0, 3, 1, 2)         layer scale, residual

Stochastic depth is the identity at inference. GELU is the exact (erf) form. Every parameter is
bfloat16 and each layer's output is rounded to bfloat16, as a bf16 model in PyTorch runs it.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, C: int):
        super().__init__()
        self.dwconv = nn.Conv2d(C, C, 7, padding=3, groups=C)
        self.norm = nn.LayerNorm(C, eps=1e-6)
        self.pwconv1 = nn.Linear(C, 4 * C)
        self.pwconv2 = nn.Linear(4 * C, C)
        self.gamma = nn.Parameter(torch.empty(C), requires_grad=False)
        with torch.no_grad():
            # weights ~ N(0, 1/fan_in), biases ~ 0.1 N(0, 1); LayerNorm weight and bias away from
            # ones and zeros; the layer scale of a trained network (ConvNeXt's init is 1e-6, trained
            # values spread over roughly 0.1 to 1)
            for layer in (self.dwconv, self.pwconv1, self.pwconv2):
                fan_in = layer.weight[0].numel()
                layer.weight.copy_(torch.randn(layer.weight.shape) / math.sqrt(fan_in))
                layer.bias.copy_(0.1 * torch.randn(layer.bias.shape))
            self.norm.weight.copy_(1.0 + 0.3 * torch.randn(C))
            self.norm.bias.copy_(0.3 * torch.randn(C))
            self.gamma.copy_(0.5 + 0.2 * torch.randn(C))
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.dwconv(x).permute(0, 2, 3, 1)
        t = self.pwconv2(F.gelu(self.pwconv1(self.norm(t))))
        return x + (self.gamma * t).permute(0, 3, 1, 2)


def get_init_inputs(C, **params):
    return [C]


def get_inputs(N, C, H, W, **params):
    # the residual stream of a ConvNeXt stage: unit size with per-channel offsets (the LayerNorm's
    # mean matters)
    x = torch.randn(N, C, H, W) + 0.5 * torch.randn(1, C, 1, 1)
    return [x.to(torch.bfloat16)]
