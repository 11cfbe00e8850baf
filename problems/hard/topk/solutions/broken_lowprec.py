"""Broken on purpose: selects on a float16 copy of the rows and returns the float16 values.

The lazy shortcut: half the bytes to compare, so "faster". But float16 keeps 11 significant bits,
so every returned value is the input rounded (the outputs are not copies of the inputs any more),
near-equal values collapse into ties and may come out in the wrong order or past the k-th place,
-FLT_MAX becomes -inf and values beyond 65504 become inf. No forbidden op is called (repeated
argmax with masking), so it is the numbers that must fail, not the policy.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = int(k)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        work = x.to(torch.float16)
        rows = x.shape[0]
        values = torch.empty((rows, self.k), dtype=torch.float32, device=x.device)
        indices = torch.empty((rows, self.k), dtype=torch.int64, device=x.device)
        taken = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
        for j in range(self.k):
            best = torch.where(taken, torch.tensor(float("-inf"), dtype=torch.float16, device=x.device), work)
            # an all -inf remainder still has to give an unused column: prefer untaken ones
            best_idx = torch.argmax(best, dim=-1)
            best_idx = torch.where(taken.gather(-1, best_idx[:, None])[:, 0],
                                   torch.argmin(taken.to(torch.int8), dim=-1), best_idx)
            indices[:, j] = best_idx
            values[:, j] = work.gather(-1, best_idx[:, None])[:, 0].to(torch.float32)
            taken.scatter_(-1, best_idx[:, None], True)
        return values, indices
