"""Log-softmax with a compensated (error-free) row sum, all in float32.

Two passes over the row. The first finds the maximum m. The second forms e = exp(x - m) (the top
term is exactly 1) and sums e with a pairwise tree in which every addition is Knuth's TwoSum:
s = a + b is kept, and its exact rounding error (a - (s - b')) + (b - b'), b' = s - a, goes into a
separate error sum. The row sum is then the unevaluated pair hi + lo (hi = the float32 sum,
lo = the sum of the rounding errors), exact to about 2^-48 relative. The log is taken without
rounding the pair back into one float32: log(S) = log1p((hi - 1) + lo), where hi - 1 is exact
(Sterbenz) whenever hi is within a factor 2 of 1, the only case where it matters.

The same TwoSum/Kahan-Neumaier update works as the running sum of a one-pass (online) kernel; the
tree form is used here because it is a handful of whole-tensor operations per level in PyTorch.
"""

import torch
from torch import nn


def two_sum_tree(e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of each row of e (B, N) as hi + lo: hi is the float32 pairwise sum, lo its rounding error."""
    rows, cols = e.shape
    width = 1 << max(cols - 1, 0).bit_length()
    s = torch.zeros((rows, width), dtype=torch.float32, device=e.device)
    s[:, :cols] = e  # zero padding adds nothing and no error
    lo = torch.zeros((rows, 1), dtype=torch.float32, device=e.device)
    while s.shape[1] > 1:
        a, b = s[:, 0::2], s[:, 1::2]
        t = a + b
        b_virtual = t - a
        err = (a - (t - b_virtual)) + (b - b_virtual)  # exact: a + b == t + err
        lo = lo + err.sum(dim=-1, keepdim=True)  # errors are ~2^-24 of the terms: a plain sum will do
        s = t
    return s, lo


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x - x.amax(dim=-1, keepdim=True)
        hi, lo = two_sum_tree(torch.exp(d))
        return d - torch.log1p((hi - 1.0) + lo)
