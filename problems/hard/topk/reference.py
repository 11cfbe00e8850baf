"""Row top-k: the k largest values of every row of a float32 (B, N) tensor, in descending order,
with their int64 column indices (torch.topk(x, k, dim=-1, largest=True, sorted=True))."""

import torch
from torch import nn


class Model(nn.Module):
    # k is a constructor argument, not a forward input: a sampler (top-k = 50), a beam search
    # (2 x beams) or an MoE router (experts per token) fixes it when it is built, and a kernel may
    # specialize on it the way deployments do.
    def __init__(self, k: int):
        super().__init__()
        self.k = int(k)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, indices = torch.topk(x, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


def get_init_inputs(k, **params):
    return [k]


def get_inputs(B, N, k, distinct=0, masked=0.0, **params):
    """x (B, N) float32.

    distinct = 0: continuous logits, torch.randn.
    distinct > 0: integers from a range of `distinct` values, cast to float32, so most values
        occur many times in a row (exact ties, also at the k-th place).
    masked > 0: about this fraction of the entries is masked, half of them with -inf and half with
        the most negative finite float32 (the two masking conventions of sampling code).
    """
    if distinct > 0:
        low = -(distinct // 2)
        x = torch.randint(low, low + distinct, (B, N), dtype=torch.int32).to(torch.float32)
    else:
        x = torch.randn(B, N, dtype=torch.float32)
    if masked > 0:
        hit = torch.rand(B, N) < masked
        fill = torch.where(torch.rand(B, N) < 0.5,
                           torch.tensor(float("-inf")),
                           torch.tensor(torch.finfo(torch.float32).min))
        x = torch.where(hit, fill, x)
    return [x.contiguous()]
