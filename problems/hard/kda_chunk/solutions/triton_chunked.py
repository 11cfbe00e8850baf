"""KDA forward in Triton, chunked: 16 tokens at a time, the fp32 state slice in registers.

One program per (batch, head, block of BV value columns) walks the sequence in chunks of C = 16
tokens (the value columns of the state are independent, so they split across programs freely).
Within a chunk, with G the cumulative log-decay from the chunk's start (per key channel):

    A_kk[t, j] = beta_t sum_d k_t[d] e^{G_t[d] - G_j[d]} k_j[d]   (j < t)      A_qk likewise, j <= t
    U   = (I + A_kk)^{-1} beta (V - (e^G * K) S)
    O   = scale (e^G * Q) S + A_qk U
    S  <- e^{G_C} * S + (e^{G_C - G} * K)^T U

The pairwise decays come from two matrix products, (e^G * K)(e^{-G} * K)^T: with C = 16 and every
log-decay at least -5 (as the problem's gates are built), e^{-G} stays below e^80, inside float32.
The unit lower-triangular inverse is a product of four factors, (I - L)(I + L^2)(I + L^4)(I + L^8)
with L = A_kk (L^16 = 0), so every step is a small matrix product. The chunk's own products do not
depend on the state; only three products a chunk sit on the sequential chain.

Products run as float32 in full IEEE precision on the chain that feeds the state and in TF32 for
the per-chunk matrices of a GPU; the state and every accumulation stay float32.
"""

import math

import torch
import triton
import triton.language as tl
from torch import nn

CHUNK = 16


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _to_bf16(x, BY_HAND: tl.constexpr):
    if BY_HAND:  # the CPU interpreter's float32 -> bfloat16 cast truncates: round to nearest even
        bits = x.to(tl.int32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def _kda_chunked(q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, o_ptr, s_ptr, T, H, n_k, n_v, scale,
                 C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                 FAST: tl.constexpr, BY_HAND: tl.constexpr):
    bh = tl.program_id(0)
    row = bh // H
    h = bh % H
    dk = tl.arange(0, BK)
    cols = tl.program_id(1) * BV + tl.arange(0, BV)
    steps = tl.arange(0, C)
    k_ok = dk < n_k
    v_ok = cols < n_v
    later = steps[:, None] > steps[None, :]  # t > j
    causal = steps[:, None] >= steps[None, :]  # t >= j
    eye = (steps[:, None] == steps[None, :]).to(tl.float32)

    state = tl.zeros([BK, BV], tl.float32)
    for start in range(0, T, C):
        t_ok = start + steps < T
        token = (row * T + start + steps).to(tl.int64) * H + h  # (C,) rows of the (B, T, H, .) layout
        km = t_ok[:, None] & k_ok[None, :]
        q = tl.load(q_ptr + token[:, None] * n_k + dk[None, :], mask=km, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + token[:, None] * n_k + dk[None, :], mask=km, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + token[:, None] * n_k + dk[None, :], mask=km, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + token[:, None] * n_v + cols[None, :], mask=t_ok[:, None] & v_ok[None, :],
                    other=0.0).to(tl.float32)
        beta = tl.load(beta_ptr + token, mask=t_ok, other=0.0).to(tl.float32)

        G = tl.cumsum(g, 0)  # (C, BK); padded tokens add 0, so G of the last row is the chunk's total
        G_last = tl.sum(tl.where(steps[:, None] == C - 1, G, 0.0), 0)  # (BK,)
        k_decayed = k * tl.exp(G)
        k_grown = k * tl.exp(-G)
        q_decayed = q * tl.exp(G) * scale
        # the per-chunk matrices (no state in them)
        L = tl.where(later, _dot(k_decayed, tl.trans(k_grown), FAST), 0.0) * beta[:, None]
        A_qk = tl.where(causal, _dot(q_decayed, tl.trans(k_grown), FAST), 0.0)
        L2 = _dot(L, L, "ieee")
        L4 = _dot(L2, L2, "ieee")
        L8 = _dot(L4, L4, "ieee")
        inverse = _dot(_dot(eye - L, eye + L2, "ieee"), _dot(eye + L4, eye + L8, "ieee"), "ieee")

        # the sequential chain: the state in, the deltas, the outputs and the state out
        rhs = beta[:, None] * (v - _dot(k_decayed, state, "ieee"))
        U = _dot(inverse, rhs, "ieee")
        out = _dot(q_decayed, state, "ieee") + _dot(A_qk, U, "ieee")
        tl.store(o_ptr + token[:, None] * n_v + cols[None, :], _to_bf16(out, BY_HAND),
                 mask=t_ok[:, None] & v_ok[None, :])
        k_tail = k * tl.exp(G_last[None, :] - G)  # (C, BK), exponents <= 0
        state = tl.exp(G_last)[:, None] * state + _dot(tl.trans(k_tail), U, "ieee")

    s_rows = bh.to(tl.int64) * n_k + dk
    tl.store(s_ptr + s_rows[:, None] * n_v + cols[None, :], state, mask=k_ok[:, None] & v_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, g, beta):
        q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
        B, T, H, n_k = q.shape
        n_v = v.shape[-1]
        o = torch.empty((B, T, H, n_v), dtype=torch.bfloat16, device=q.device)
        state = torch.zeros((B, H, n_k, n_v), dtype=torch.float32, device=q.device)
        if T == 0:
            return o, state
        bk = max(16, triton.next_power_of_2(n_k))
        bv = max(16, min(32, triton.next_power_of_2(n_v)))
        grid = (B * H, triton.cdiv(n_v, bv))
        _kda_chunked[grid](q, k, v, g, beta, o, state, T, H, n_k, n_v, 1.0 / math.sqrt(n_k),
                           C=CHUNK, BK=bk, BV=bv, FAST="tf32" if q.is_cuda else "ieee",
                           BY_HAND=not q.is_cuda, num_warps=4)
        return o, state
