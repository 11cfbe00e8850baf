"""Log-softmax with the top term kept apart from the rest, in float32 (expected: correct).

Not compensated summation, but the exact technique it stands for here: the term of the maximum is
exactly exp(0) = 1, so the row sum is S = 1 + R with R = the sum of every other term. R is a sum of
positive numbers, accurate to ~log2(N) * 2^-24 relative in plain float32, and log(S) = log1p(R)
never rounds 1 + R. Only one copy of the maximum is left out, so a tie (two maxima) gives
R = 1 + T and log1p(R) = log(2 + T), as it should. This shows what the problem requires: that the
mass outside the top term is never rounded into one float32 number together with the top term.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x - x.amax(dim=-1, keepdim=True)
        top = x.argmax(dim=-1, keepdim=True)
        rest = torch.exp(d).scatter(-1, top, 0.0).sum(dim=-1, keepdim=True)
        return d - torch.log1p(rest)
