"""Log-softmax over the last dimension of a 2-D float32 tensor."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_init_inputs(**params):
    return []


def get_inputs(B, N, offset=0.5, **params):
    return [torch.randn(B, N, dtype=torch.float32) * 3.0 + offset]
