"""SOTA line: none. No library computes a float32 log-softmax to this problem's bound.

The library op this problem replaces is torch.log_softmax (Model below, in float32). It keeps the
row's log-sum-exp as one float32 number, so on a confident row the top token's log-probability
-log(1 + T) comes out as 0, or off by up to 100 %: measured on the CPU, it fails every smoke
shape and every visible row length (max relative error 1.0 against the bound 1e-5). The same holds
for any kernel that keeps the row sum d, or the log-sum-exp, as one float32 value: Liger-Kernel's
fused cross-entropy, for one, computes the loss as -(x_y - m - log(d)) from a float32 online sum
d; 1 + T rounded to one float32 has an absolute error up to 6e-8, larger than T itself.

The accurate library path, torch.log_softmax on a float64 copy, is not a float32 kernel (float64
is what this problem's policy forbids to candidates), it is what the eager baseline already
times (the reference computes in float64), and it is not even within the bound on the CPU:
measured there over a few seeds, it is off by 5e-5 to 1.4e-4 relative on rows of 128256-151936
and by 5.5e-4 to 7.6e-4 on rows of 2^21,
because its float64 running sums sit near 1, where every addition is rounded by up to 1.1e-16,
thousands of times per row: not small next to a T of 1e-9. So no SOTA line is drawn;
available() says why.
"""

import torch
from torch import nn


def available():
    return ("no library meets the bound: torch.log_softmax in float32 keeps the log-sum-exp as one "
            "float32 number and returns 0 for the top token of a confident row (relative error up to "
            "1.0 against 1e-5); on a float64 copy it is not a float32 kernel, is what the eager "
            "float64 reference already times, and on the CPU is off by up to 7.6e-4 relative")


class Model(nn.Module):
    """torch.log_softmax in float32: the library op, shown for the record; it fails the bound."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)
