"""Broken on purpose: the usual single-pass ("online") softmax in plain float32.

The row is walked in blocks of 1024 columns, as in the Triton softmax tutorial and the examples
deck: each of 1024 lanes keeps a running maximum and a running sum of exp(x - max), rescaled when
its maximum grows; the lanes are then merged, and y = x - max - log(sum). Every step is float32.
It is what a kernel author writes first, and it fails here: on a confident row the sum is
1 + T with T below about 1e-4, one float32 number near 1 keeps T only to the nearest 1.2e-7 (and
loses every term below half of that as it adds it), and log(sum) makes the top token's
log-probability 0 or off by up to 100 %.
"""

import torch
from torch import nn

BLOCK = 1024


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        blocks = (cols + BLOCK - 1) // BLOCK
        padded = torch.full((rows, blocks * BLOCK), float("-inf"), dtype=torch.float32, device=x.device)
        padded[:, :cols] = x
        run_max = torch.full((rows, BLOCK), float("-inf"), dtype=torch.float32, device=x.device)
        run_sum = torch.zeros((rows, BLOCK), dtype=torch.float32, device=x.device)
        for b in range(blocks):
            chunk = padded[:, b * BLOCK:(b + 1) * BLOCK]
            new_max = torch.maximum(run_max, chunk)
            safe = torch.where(new_max == float("-inf"), 0.0, new_max)  # lanes that saw only padding
            run_sum = run_sum * torch.exp(run_max - safe) + torch.exp(chunk - safe)
            run_max = new_max
        row_max = run_max.amax(dim=-1, keepdim=True)
        scale = torch.where(run_max == float("-inf"), 0.0, torch.exp(run_max - row_max))
        total = (run_sum * scale).sum(dim=-1, keepdim=True)
        return x - row_max - torch.log(total)
