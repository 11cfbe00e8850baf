"""PyTorch baseline without the layer_norm op: mean and biased variance per row, then the affine map."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        # Holds the parameters (ln.weight, ln.bias) so the reference's state_dict loads; never called.
        self.ln = nn.LayerNorm(hidden_size, eps=1e-5, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        return centered * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
