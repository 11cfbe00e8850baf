"""Kimi Delta Attention (KDA) forward: a gated delta rule with a per-channel decay.

Per batch b and head h, with a state S of shape (Dk, Dv) kept in float32 and zero at t = 0:

    S_t = (I - beta_t k_t k_t^T) Diag(exp(g_t)) S_{t-1} + beta_t k_t v_t^T
    o_t = S_t^T (scale * q_t),        scale = 1 / sqrt(Dk)

The decay Diag(exp(g_t)) acts on the key dimension (rows of S) and is applied first; the delta
update then reads the decayed state. This is the recurrence of the Kimi Linear paper and of the
`fla` package's `chunk_kda` (with use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False). q and
k arrive already L2-normalised over Dk (the caller normalises them; they are not normalised
again here), g is the per-channel log-decay (g <= 0, float32), beta is in (0, 1).

Two implementations of the same recurrence:

- `kda_recurrent`: token by token, the definition. Too slow on a GPU for long sequences (one
  Python step per token), so it is used only to check `kda_chunked` (run this file:
  `python reference.py` compares them in float64 and float32 on the CPU).
- `kda_chunked`: the same recurrence evaluated 64 tokens at a time (the standard chunked form of
  the delta rule, derived in its docstring), float32 throughout, one Python step per chunk.
  `Model.forward` uses it.

Outputs: o (B, T, H, Dv) bfloat16 and the final state S_T (B, H, Dk, Dv) float32, which a
prefill kernel hands to the decoding steps that follow.
"""

import math

import torch
from torch import nn

CHUNK = 64


def kda_recurrent(q, k, v, g, beta, scale):
    """The definition, one token at a time, in the dtype of the inputs (float32 or float64).

    q, k: (B, T, H, Dk); v: (B, T, H, Dv); g: (B, T, H, Dk); beta: (B, T, H).
    Returns o (B, T, H, Dv) and the final state S (B, H, Dk, Dv).
    """
    B, T, H, Dk = q.shape
    Dv = v.shape[-1]
    S = torch.zeros(B, H, Dk, Dv, dtype=q.dtype, device=q.device)
    o = torch.empty(B, T, H, Dv, dtype=q.dtype, device=q.device)
    for t in range(T):
        q_t, k_t, v_t, b_t = q[:, t], k[:, t], v[:, t], beta[:, t]
        S = torch.exp(g[:, t]).unsqueeze(-1) * S                      # Diag(alpha_t) S_{t-1}
        predicted = torch.einsum("bhk,bhkv->bhv", k_t, S)             # S^T k_t
        delta = b_t.unsqueeze(-1) * (v_t - predicted)                 # beta_t (v_t - S^T k_t)
        S = S + k_t.unsqueeze(-1) * delta.unsqueeze(-2)               # + k_t delta^T
        o[:, t] = torch.einsum("bhk,bhkv->bhv", scale * q_t, S)       # S_t^T (scale q_t)
    return o, S


def kda_chunked(q, k, v, g, beta, scale, chunk=CHUNK):
    """The same recurrence, a chunk of C tokens at a time (C = chunk; the last chunk may be short).

    Inside a chunk starting from state S0, let G_t = g_1 + ... + g_t (cumulative log-decay per
    channel, t = 1..C), and u_t = beta_t (v_t - (Diag(alpha_t) S_{t-1})^T k_t) the delta written
    at step t, so that S_t = Diag(alpha_t) S_{t-1} + k_t u_t^T. Unrolling,

        S_t = Diag(exp(G_t)) S0 + sum_{j <= t} Diag(exp(G_t - G_j)) k_j u_j^T.

    Substituting S_{t-1} into u_t gives a unit lower-triangular system for U = [u_1; ...; u_C]:

        u_t + beta_t sum_{j < t} (k_t . exp(G_t - G_j) . k_j) u_j = beta_t (v_t - S0^T (exp(G_t) * k_t))

    and then
        o_t     = scale * ( S0^T (exp(G_t) * q_t) + sum_{j <= t} (q_t . exp(G_t - G_j) . k_j) u_j )
        S_C     = Diag(exp(G_C)) S0 + sum_j (exp(G_C - G_j) * k_j) u_j^T.

    Every exponent used is <= 0 (only pairs j <= t are formed), so nothing overflows for any
    decay. float32 inputs give float32 arithmetic; float64 inputs give float64.
    """
    B, T, H, Dk = q.shape
    Dv = v.shape[-1]
    dtype, device = q.dtype, q.device
    # heads next to batch: (B, H, T, D)
    q, k, v, g = (x.transpose(1, 2) for x in (q, k, v, g))
    beta = beta.transpose(1, 2)
    S = torch.zeros(B, H, Dk, Dv, dtype=dtype, device=device)
    o = torch.empty(B, H, T, Dv, dtype=dtype, device=device)
    for start in range(0, T, chunk):
        end = min(start + chunk, T)
        C = end - start
        q_c, k_c, v_c, b_c = q[:, :, start:end], k[:, :, start:end], v[:, :, start:end], beta[:, :, start:end]
        G = torch.cumsum(g[:, :, start:end], dim=2)                             # (B, H, C, Dk)
        # pairwise decay exp(G_t - G_j) for j <= t, zero above the diagonal: (B, H, C_t, C_j, Dk)
        causal = torch.ones(C, C, dtype=torch.bool, device=device).tril()
        exponent = G.unsqueeze(3) - G.unsqueeze(2)
        decay = torch.exp(exponent.masked_fill(~causal[:, :, None], float("-inf")))
        # A_kk[t, j] = beta_t sum_d k_t[d] exp(G_t[d] - G_j[d]) k_j[d] for j < t;
        # A_qk[t, j] = sum_d q_t[d] exp(G_t[d] - G_j[d]) k_j[d] for j <= t (decay is zero for j > t)
        decayed_k = decay * k_c.unsqueeze(2)                                   # [t, j, d] = decay_tj[d] k_j[d]
        A_kk = b_c.unsqueeze(-1) * torch.einsum("bhtd,bhtjd->bhtj", k_c, decayed_k).tril(-1)
        A_qk = torch.einsum("bhtd,bhtjd->bhtj", q_c, decayed_k)
        # U = (I + A_kk)^-1 beta (V - (exp(G) * K) S0); the inverse of the unit lower-triangular
        # I + A_kk by a triangular solve, then applied as a matrix product
        eye = torch.eye(C, dtype=dtype, device=device)
        inverse = torch.linalg.solve_triangular(eye + A_kk, eye.expand_as(A_kk), upper=False, unitriangular=True)
        rhs = b_c.unsqueeze(-1) * (v_c - torch.matmul(torch.exp(G) * k_c, S))
        U = torch.matmul(inverse, rhs)
        o[:, :, start:end] = scale * (torch.matmul(torch.exp(G) * q_c, S) + torch.matmul(A_qk, U))
        G_last = G[:, :, -1:]                                                   # (B, H, 1, Dk)
        S = torch.exp(G_last).transpose(-1, -2) * S \
            + torch.matmul((torch.exp(G_last - G) * k_c).transpose(-1, -2), U)
    return o.transpose(1, 2), S


class Model(nn.Module):
    """KDA forward: o = KDA(q, k, v, g, beta) with a zero initial state; returns (o, final state).

    No weights: the projections that produce q, k, v, g and beta belong to the layer around this
    operator, so they are inputs here, as they are to `chunk_kda` in a deployment.
    """

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, g, beta):
        scale = 1.0 / math.sqrt(q.shape[-1])
        o, S = kda_chunked(q.float(), k.float(), v.float(), g.float(), beta.float(), scale)
        return o.to(torch.bfloat16), S


def get_init_inputs(**params):
    return []


def get_inputs(B, T, H, Dk, Dv, **params):
    """Inputs as the Kimi Linear layer hands them to its KDA kernel.

    q, k: unit vectors over Dk (the layer L2-normalises them), rounded to bfloat16.
    v: standard normal, bfloat16. beta: sigmoid of a standard normal, bfloat16, in (0, 1).
    g: float32 log-decay per (token, head, key channel), built as the layer builds it:
    g = -A_h * softplus(x + b_{h,d}) with A_h ~ U(1, 16) per head, b_{h,d} the inverse softplus of a
    per-channel time step dt in [1e-3, 0.1] (log-uniform) and x ~ N(0, 1) the per-token gate
    logits; then floored at -5 (the lower bound newer KDA gates use). Of the per-step decays
    alpha = exp(g), about 60 % are above 0.9 and 16 % above 0.99 (long memory), about 10 % below 0.5.
    """
    q = torch.randn(B, T, H, Dk)
    k = torch.randn(B, T, H, Dk)
    q = (q / q.norm(dim=-1, keepdim=True)).to(torch.bfloat16)
    k = (k / k.norm(dim=-1, keepdim=True)).to(torch.bfloat16)
    v = torch.randn(B, T, H, Dv).to(torch.bfloat16)
    beta = torch.sigmoid(torch.randn(B, T, H)).to(torch.bfloat16)
    A = torch.empty(H).uniform_(1.0, 16.0)
    dt = torch.exp(torch.empty(H, Dk).uniform_(math.log(1e-3), math.log(1e-1)))
    dt_bias = dt + torch.log(-torch.expm1(-dt))                                # softplus(dt_bias) = dt
    x = torch.randn(B, T, H, Dk)
    g = (-A[:, None] * nn.functional.softplus(x + dt_bias)).clamp_min(-5.0)
    return [q, k, v, g, beta]


if __name__ == "__main__":
    # The chunked form against the definition, on the CPU (T not a multiple of the chunk, Dk != Dv).
    torch.manual_seed(0)
    q, k, v, g, beta = get_inputs(B=2, T=200, H=3, Dk=32, Dv=48)
    scale = 1.0 / math.sqrt(q.shape[-1])
    for dtype in (torch.float64, torch.float32):
        args = [x.to(dtype) for x in (q, k, v, g, beta)]
        o_r, S_r = kda_recurrent(*args, scale)
        o_c, S_c = kda_chunked(*args, scale)
        for name, r, c in (("o", o_r, o_c), ("S", S_r, S_c)):
            err = float((c - r).norm() / r.norm())
            print(f"{dtype}: {name} chunked vs recurrent, normwise relative error {err:.2e}, "
                  f"max abs {float((c - r).abs().max()):.2e}")
