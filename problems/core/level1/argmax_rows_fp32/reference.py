"""Row maximum and argmax of a float32 (B, N) tensor: torch.max(x, dim=-1, keepdim=True)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.max(x, dim=-1, keepdim=True)  # (B, 1) float32, (B, 1) int64
        return values, indices


def get_init_inputs(**params):
    return []


def get_inputs(B, N, **params):
    # continuous values: exact ties in a row are vanishingly rare (and judged fairly if they occur)
    return [torch.randn(B, N, dtype=torch.float32) * 3.0 + 0.5]
