"""Broken on purpose: the KDA recurrence token by token with the state kept in bfloat16.

Every step rounds the (Dk x Dv) state to bfloat16: a decay alpha close to 1 (most channels) is
partly lost to rounding and the rounding errors of thousands of steps add up. The output drifts
by about 1 to 3 % (normwise) from the float32-state answer, outside the problem's tolerance, so it
must be judged incorrect.
"""

import math

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, g, beta):
        B, T, H, Dk = q.shape
        Dv = v.shape[-1]
        scale = 1.0 / math.sqrt(Dk)
        alpha = torch.exp(g).to(torch.bfloat16)
        S = torch.zeros(B, H, Dk, Dv, dtype=torch.bfloat16, device=q.device)
        o = torch.empty(B, T, H, Dv, dtype=torch.bfloat16, device=q.device)
        for t in range(T):
            S = alpha[:, t].unsqueeze(-1) * S
            predicted = torch.einsum("bhk,bhkv->bhv", k[:, t], S)
            delta = beta[:, t].unsqueeze(-1) * (v[:, t] - predicted)
            S = S + k[:, t].unsqueeze(-1) * delta.unsqueeze(-2)
            o[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, S)
        return o, S.float()
