"""Lazy on purpose: lets PyTorch copy the permuted view instead of running a CUDA kernel, which this
kernel-to-kernel task forbids, so it must be rejected."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1).contiguous()
