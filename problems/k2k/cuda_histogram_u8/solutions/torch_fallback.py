"""Lazy on purpose: computes the result with torch.bincount instead of a CUDA kernel, which this
kernel-to-kernel task forbids, so it must be rejected."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        idx = x.long() + 256 * torch.arange(B, device=x.device).unsqueeze(1)
        return torch.bincount(idx.flatten(), minlength=256 * B).view(B, 256).to(torch.int32)
