"""Plain two-pass log-softmax in float32 with PyTorch's own reductions (expected: incorrect).

max, then sum(exp(x - max)) with torch.sum (pairwise/tree-ordered, so its relative error is only
about log2(N) * 2^-24), then x - max - log(sum). The sum is as good as a float32 sum gets, and that
is the point: the *order* of the additions is not the problem. The true sum is 1 + T with T as
small as 1e-9; any single float32 number near 1 holds T only to the nearest 1.2e-7, so the top
token's log-probability -log(1 + T) comes out as 0 or with a large relative error, whatever the
order. (torch.log_softmax in float32 behaves the same way.)
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x - x.amax(dim=-1, keepdim=True)
        return d - torch.log(torch.exp(d).sum(dim=-1, keepdim=True))
