"""LayerNorm over the last dimension of a 2-D float32 tensor, with learnable weight and bias."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden_size, eps=1e-5, elementwise_affine=True, bias=True,
                               dtype=torch.float32)
        # Away from the default (ones, zeros), so that a kernel ignoring the affine part fails.
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(hidden_size))
            self.ln.bias.copy_(0.5 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_init_inputs(N, **params):
    return [N]


def get_inputs(B, N, **params):
    # non-zero mean and a spread of 2: a kernel that skips the mean or the variance fails
    return [torch.randn(B, N, dtype=torch.float32) * 2 + 0.5]
