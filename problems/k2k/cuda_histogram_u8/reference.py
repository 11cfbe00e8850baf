"""Per-row 256-bin histograms of uint8 data (per-image intensity histograms): counts[b, v] is the
number of entries of row b of x equal to v, as int32.

Counted by sorting each row and finding where each value's run starts, not by scattering ones
into the counts: no atomics, so the time does not depend on where the counts land in physical
memory (atomics on the hot bins queue in whichever L2 slice serves their address)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # in a sorted row the run of value v starts at the first position holding v or more; the
        # runs' lengths are the differences of these starts, with P closing the last one
        B, P = x.shape
        rows = torch.sort(x, dim=1).values
        bins = torch.arange(256, dtype=x.dtype, device=x.device).expand(B, 256).contiguous()
        starts = torch.searchsorted(rows, bins)  # (B, 256) int64
        ends = torch.cat([starts[:, 1:], starts.new_full((B, 1), P)], dim=1)
        return (ends - starts).to(torch.int32)


def get_init_inputs(**params):
    return []


def get_inputs(B, P, **params):
    # The sum of two uniform draws from [0, 128): a triangular distribution peaking at 127, like the
    # mid-grey bulk of natural images; popular bins see many more hits than rare ones.
    a = torch.randint(0, 128, (B, P), dtype=torch.uint8)
    b = torch.randint(0, 128, (B, P), dtype=torch.uint8)
    return [a + b]
