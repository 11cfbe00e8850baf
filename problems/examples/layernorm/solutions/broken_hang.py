"""Broken on purpose: forward never returns, so the evaluation must time out."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden_size, eps=1e-5, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            pass
