"""Lazy on purpose: computes the result with torch ops instead of Triton kernels, which this
kernel-to-kernel task forbids, so it must be rejected."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        gate, up = h.float().chunk(2, dim=-1)
        return (F.silu(gate) * up).to(torch.bfloat16)
