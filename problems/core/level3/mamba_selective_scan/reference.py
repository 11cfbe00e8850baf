"""Mamba's selective scan (the S6 recurrence of a Mamba-1 layer), forward, with the gate.

For batch b, channel d and state index n, with a float32 state h (B, D, N) that starts at zero:

    dt[b, d, t] = softplus(delta[b, d, t] + delta_bias[d])
    A[d, n]     = -exp(A_log[d, n])
    h[b, d, n]  = exp(dt[b, d, t] * A[d, n]) * h[b, d, n] + dt[b, d, t] * Bm[b, n, t] * u[b, d, t]
    y[b, d, t]  = sum_n h[b, d, n] * Cm[b, n, t] + Dp[d] * u[b, d, t]
    out[b, d, t] = y[b, d, t] * silu(z[b, d, t])

u, delta, z (B, D, L) and Bm, Cm (B, N, L) are bfloat16 (the layout of mamba_ssm's
selective_scan_fn); A_log (D, N), Dp (D) and delta_bias (D) are float32 parameters. All arithmetic
is float32; out (B, D, L) is rounded to bfloat16 once. The reference steps through time one token
at a time.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, D: int, N: int):
        super().__init__()
        # Mamba's initialisation with some spread, as after training: A = -(1..N) per channel,
        # jittered; Dp around 1; dt = softplus(delta_bias) log-uniform in [0.001, 0.1].
        a = torch.arange(1, N + 1, dtype=torch.float32).repeat(D, 1)
        self.A_log = nn.Parameter(torch.log(a) + 0.2 * torch.randn(D, N), requires_grad=False)
        self.Dp = nn.Parameter(1.0 + 0.5 * torch.randn(D), requires_grad=False)
        dt = torch.exp(torch.rand(D) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        self.delta_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)), requires_grad=False)  # softplus^-1(dt)

    def forward(self, u, delta, Bm, Cm, z):
        Bsz, D, L = u.shape
        A = -torch.exp(self.A_log)  # (D, N)
        dt = F.softplus(delta.float() + self.delta_bias[:, None])  # (B, D, L)
        dtu = dt * u.float()
        Bf, Cf = Bm.float(), Cm.float()
        h = torch.zeros(Bsz, D, A.shape[1], dtype=torch.float32, device=u.device)
        ys = []
        for t in range(L):
            h = torch.exp(dt[:, :, t, None] * A) * h + dtu[:, :, t, None] * Bf[:, None, :, t]
            ys.append((h * Cf[:, None, :, t]).sum(-1))  # (B, D)
        y = torch.stack(ys, dim=-1) + self.Dp[:, None] * u.float()
        return (y * F.silu(z.float())).to(torch.bfloat16)


def get_init_inputs(D, N, **params):
    return [D, N]


def get_inputs(B, D, L, N, **params):
    # the outputs of a Mamba layer's in_proj / conv1d / x_proj: unit-size u and z, B and C; delta of
    # spread 0.5 around the bias (so dt varies per token: the scan is selective)
    u = torch.randn(B, D, L).to(torch.bfloat16)
    delta = (0.5 * torch.randn(B, D, L)).to(torch.bfloat16)
    Bm = torch.randn(B, N, L).to(torch.bfloat16)
    Cm = torch.randn(B, N, L).to(torch.bfloat16)
    z = (torch.randn(B, D, L) + 0.5).to(torch.bfloat16)
    return [u, delta, Bm, Cm, z]
