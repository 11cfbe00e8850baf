"""Log-softmax over the last dimension, accurate to fp32 *relative* precision in every entry.

    y[b, i] = log p[b, i] = x[b, i] - m[b] - log(sum_j exp(x[b, j] - m[b])),   m[b] = max_j x[b, j]

The entry that makes this hard is the top token of a confident row. Its log-probability is
-log(1 + T), where T = sum over the other tokens of exp(x_j - m) is the probability mass outside
the top token (here between about 1e-9 and 1e-4). A row sum S = 1 + T kept as one fp32 number
rounds T away (its ulp near 1 is 1.2e-7), so the top entry comes out as 0 or off by up to 100 %.

The reference computes in float64 and keeps T apart from the exact 1 of the top term, then
log(S) = log1p(T). It does not call torch.log_softmax on a float64 copy: measured on the CPU, that
adds the terms into float64 running sums near 1, each addition rounded by up to 1.1e-16, and its
top entry is off by 5e-5 to 1.4e-4 (relative) on rows of 128256-151936 and by 5.5e-4 to 7.6e-4 on
rows of 2^21, more than the 1e-5 this problem allows.
"""

import math

import torch
from torch import nn

SIGMA = 3.0  # spread of the bulk of the logits, like an LM head's over its vocabulary
TAIL_LOG10 = (-9.0, -4.0)  # log10 of the mass T outside the top token, uniform in this range


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xd = x.to(torch.float64)
        m = xd.amax(dim=-1, keepdim=True)
        d = xd - m
        top = xd.argmax(dim=-1, keepdim=True)
        # every term but one copy of the maximum (whose term is exactly exp(0) = 1): all positive,
        # so this float64 sum is accurate to ~1e-15 relative however small it is
        rest = torch.exp(d).scatter(-1, top, 0.0).sum(dim=-1, keepdim=True)
        return (d - torch.log1p(rest)).to(torch.float32)


def get_init_inputs(**params):
    return []


def get_inputs(B, N, **params):
    # The bulk: LM-head logits computed in bfloat16 and upcast to float32, as training and RL
    # stacks get them (this also makes x - max(x) exact in float32 for every term that matters).
    x = (torch.randn(B, N) * SIGMA).to(torch.bfloat16).to(torch.float32)
    rows = torch.arange(B)
    # One dominant ("confident") token per row, placed so that the mass outside it is T:
    # top = logsumexp(bulk) - log(T), also rounded to bfloat16 (T moves by at most 13 %).
    log_t = torch.empty(B, dtype=torch.float64).uniform_(*TAIL_LOG10) * math.log(10.0)
    top = (torch.logsumexp(x.to(torch.float64), dim=-1) - log_t).to(torch.bfloat16).to(torch.float32)
    # Row kinds: 0-5 confident (one dominant token), 6 a tie (the dominant value twice, so S = 2 + T),
    # 7 ordinary (no dominant token). Row 0 is always confident, so every shape has one.
    kind = torch.randint(0, 8, (B,))
    kind[0] = 0
    pos = torch.randint(0, N, (B,))
    other = (pos + torch.randint(1, N, (B,))) % N  # a second column, never pos (needs N >= 2)
    dominant = kind <= 6
    x[rows[dominant], pos[dominant]] = top[dominant]
    tie = kind == 6
    x[rows[tie], other[tie]] = top[tie]
    return [x]
