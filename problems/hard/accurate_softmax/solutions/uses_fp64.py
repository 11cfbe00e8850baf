"""Rejected on purpose: the log-softmax computed in float64 and rounded back to float32.

Accurate (it is what the reference does), but not a float32 kernel: the problem asks for the
accuracy to come from the algorithm, not from wider arithmetic. The policy forbids Tensor.double,
torch.float64 / torch.double and the other float64 spellings it can see, so this is `rejected`.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xd = x.double()
        d = xd - xd.amax(dim=-1, keepdim=True)
        rest = torch.exp(d).scatter(-1, xd.argmax(dim=-1, keepdim=True), 0.0).sum(dim=-1, keepdim=True)
        return (d - torch.log1p(rest)).to(torch.float32)
