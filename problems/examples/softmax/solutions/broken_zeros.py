"""Broken on purpose: returns zeros. Softmax outputs are small (about 1/N), so zeros can pass an
elementwise check with an absolute tolerance; the normwise check must reject them."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(x.shape, dtype=torch.float32, device=x.device)
