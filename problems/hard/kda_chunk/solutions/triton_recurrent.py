"""KDA forward in Triton, token by token: the recurrence itself, with the state in registers.

One program per (batch, head, block of BV value columns) holds its (Dk, BV) slice of the float32
state S and walks the sequence:

    S <- Diag(exp(g_t)) S;   delta = beta_t (v_t - S^T k_t);   S <- S + k_t delta^T;   o_t = S^T (scale q_t)

The value columns of S are independent of each other (every update acts on rows, through k_t and
g_t), so splitting Dv across programs needs no communication; Dv / BV programs per head give the
parallelism that the sequential time axis does not. Each step's inputs are loaded one step ahead,
so their latency hides behind the previous step's arithmetic, and two warps per program keep the
two reductions over Dk a step needs short (a step is a latency chain, not a throughput problem).
No chunking and no tensor cores: this is the "fused recurrent" form, exact in float32, a simple
bar for the chunked kernels (fla's chunk_kda) to beat on long sequences.
"""

import math

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _load_step(q_ptr, k_ptr, g_ptr, v_ptr, beta_ptr, t, T, row, H, h, n_k, n_v, dk, cols):
    token = (row * T + t).to(tl.int64) * H + h  # (b, t, h) in the (B, T, H, ...) layout
    k_mask = dk < n_k
    v_mask = cols < n_v
    q = tl.load(q_ptr + token * n_k + dk, mask=k_mask, other=0.0).to(tl.float32)
    k = tl.load(k_ptr + token * n_k + dk, mask=k_mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + token * n_k + dk, mask=k_mask, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + token * n_v + cols, mask=v_mask, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + token).to(tl.float32)
    return q, k, g, v, beta


@triton.jit
def _to_bf16(x, BY_HAND: tl.constexpr):
    if BY_HAND:  # the CPU interpreter's float32 -> bfloat16 cast truncates: round to nearest even
        bits = x.to(tl.int32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def _step(state, q, k, g, v, beta, scale, o_ptr, t, T, row, H, h, n_v, cols, BY_HAND: tl.constexpr):
    state = state * tl.exp(g)[:, None]
    predicted = tl.sum(state * k[:, None], 0)
    delta = beta * (v - predicted)
    state = state + k[:, None] * delta[None, :]
    out = tl.sum(state * (q * scale)[:, None], 0)
    token = (row * T + t).to(tl.int64) * H + h
    tl.store(o_ptr + token * n_v + cols, _to_bf16(out, BY_HAND), mask=cols < n_v)
    return state


@triton.jit
def _kda_recurrent(q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, o_ptr, s_ptr, T, H, n_k, n_v, scale,
                   BK: tl.constexpr, BV: tl.constexpr, BY_HAND: tl.constexpr):
    bh = tl.program_id(0)
    row = bh // H
    h = bh % H
    dk = tl.arange(0, BK)
    cols = tl.program_id(1) * BV + tl.arange(0, BV)
    state = tl.zeros([BK, BV], tl.float32)
    q, k, g, v, beta = _load_step(q_ptr, k_ptr, g_ptr, v_ptr, beta_ptr, 0, T, row, H, h, n_k, n_v,
                                  dk, cols)
    for t in range(0, T - 1):
        # the next step's inputs first: their loads overlap this step's arithmetic
        nq, nk, ng, nv, nbeta = _load_step(q_ptr, k_ptr, g_ptr, v_ptr, beta_ptr, t + 1, T, row, H, h,
                                           n_k, n_v, dk, cols)
        state = _step(state, q, k, g, v, beta, scale, o_ptr, t, T, row, H, h, n_v, cols, BY_HAND)
        q, k, g, v, beta = nq, nk, ng, nv, nbeta
    state = _step(state, q, k, g, v, beta, scale, o_ptr, T - 1, T, row, H, h, n_v, cols, BY_HAND)
    s_rows = bh.to(tl.int64) * n_k + dk
    tl.store(s_ptr + s_rows[:, None] * n_v + cols[None, :], state,
             mask=(dk < n_k)[:, None] & (cols < n_v)[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, g, beta):
        q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
        B, T, H, n_k = q.shape
        n_v = v.shape[-1]
        o = torch.empty((B, T, H, n_v), dtype=torch.bfloat16, device=q.device)
        state = torch.empty((B, H, n_k, n_v), dtype=torch.float32, device=q.device)
        if T == 0:
            return o, state.zero_()
        bk = triton.next_power_of_2(n_k)
        if q.is_cuda:
            sms = torch.cuda.get_device_properties(q.device).multi_processor_count
            # narrow value blocks when there are few (batch, head) pairs: more programs in flight
            bv = 16 if B * H * triton.cdiv(n_v, 32) < 4 * sms else 32
        else:
            bv = 16
        bv = min(bv, triton.next_power_of_2(n_v))
        grid = (B * H, triton.cdiv(n_v, bv))
        _kda_recurrent[grid](q, k, v, g, beta, o, state, T, H, n_k, n_v, 1.0 / math.sqrt(n_k),
                             BK=bk, BV=bv, BY_HAND=not q.is_cuda, num_warps=2)
        return o, state
