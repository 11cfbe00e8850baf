"""Cross-entropy over a large vocabulary, mean over the tokens that are not ignored (-100)."""

import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, ignore_index=-100, reduction="mean")


def get_init_inputs(**params):
    return []


def get_inputs(T, V, ignore=0.0, **params):
    logits = torch.randn(T, V, dtype=torch.float32) * 2.0 + 0.5
    targets = torch.randint(0, V, (T,), dtype=torch.int64)
    if ignore > 0:
        masked = torch.rand(T) < ignore
        masked[0] = False  # at least one token counts, so the mean is defined
        targets = targets.masked_fill(masked, -100)
    return [logits, targets]
