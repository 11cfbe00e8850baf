"""ResNet-50 bottleneck block (torchvision's Bottleneck, stride 1, identity shortcut), inference,
bfloat16, NCHW.

    y = relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + x)

conv1: 1x1, C -> Cm; conv2: 3x3, padding 1, Cm -> Cm; conv3: 1x1, Cm -> C; no conv biases.
BatchNorm in eval mode, with its running statistics: bn(t) = (t - running_mean) /
sqrt(running_var + 1e-5) * weight + bias, per channel. Every tensor and parameter is bfloat16; each
layer's output is rounded to bfloat16, as a bf16 model in PyTorch runs it.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, C: int, Cm: int):
        super().__init__()
        self.conv1 = nn.Conv2d(C, Cm, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(Cm)
        self.conv2 = nn.Conv2d(Cm, Cm, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(Cm)
        self.conv3 = nn.Conv2d(Cm, C, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(C)
        with torch.no_grad():
            for conv in (self.conv1, self.conv2, self.conv3):  # He init: N(0, 2 / fan_in)
                fan_in = conv.weight[0].numel()
                conv.weight.copy_(torch.randn(conv.weight.shape) * math.sqrt(2.0 / fan_in))
            # Running statistics and affine parameters of a trained network, away from the
            # defaults (mean 0, var 1, weight 1, bias 0): a kernel that drops any of them fails.
            for bn in (self.bn1, self.bn2, self.bn3):
                n = bn.num_features
                bn.running_mean.copy_(0.5 * torch.randn(n))
                bn.running_var.copy_(torch.rand(n) * 1.5 + 0.5)
                bn.weight.copy_(1.0 + 0.3 * torch.randn(n))
                bn.bias.copy_(0.3 * torch.randn(n))
            self.bn3.weight.mul_(0.5)  # the residual branch adds a fraction to the shortcut
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.bn1(self.conv1(x)))
        h = F.relu(self.bn2(self.conv2(h)))
        h = self.bn3(self.conv3(h))
        return F.relu(h + x)


def get_init_inputs(C, Cm, **params):
    return [C, Cm]


def get_inputs(N, C, H, W, **params):
    # the previous block's output: post-ReLU activations, about a third of them zero
    return [torch.relu(torch.randn(N, C, H, W) + 0.5).to(torch.bfloat16)]
