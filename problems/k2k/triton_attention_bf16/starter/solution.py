"""Starter: attention O = softmax(Q K^T / sqrt(D)) V in Triton with the scores materialised,
correct but slow.

1. `_scores`: S = Q K^T / sqrt(D) for every (batch*head), in 32 x 32 tiles, written to a float32
   buffer of shape (B*H, L, L).
2. `_softmax_rows`: one program per row of S: a max pass, a sum-of-exponentials pass and a pass
   writing P = softmax(S) as bf16 to a second (B*H, L, L) buffer.
3. `_pv`: O = P V in tiles of 32 rows, walking the keys 32 at a time.

The L x L scores cross DRAM four times (S written and read three times, P written and read), so
memory, not the tensor cores, sets the time; a fused (flash) kernel keeps them on chip.
"""

import math

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _to_bf16(x, INTERPRET: tl.constexpr):
    # Triton's CPU interpreter truncates fp32 -> bf16 casts: round to nearest even there first.
    if INTERPRET:
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        x = bits.to(tl.float32, bitcast=True)
    return x.to(tl.bfloat16)


@triton.jit
def _scores(q_ptr, k_ptr, s_ptr, L, D, scale,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, INTERPRET: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bh = tl.program_id(2).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ds = tl.arange(0, BLOCK_D)
    d_ok = ds < D
    q = tl.load(q_ptr + bh * L * D + rows[:, None] * D + ds[None, :],
                mask=(rows[:, None] < L) & d_ok[None, :], other=0.0)
    kt = tl.load(k_ptr + bh * L * D + cols[None, :] * D + ds[:, None],  # K^T tile: (BLOCK_D, BLOCK_N)
                 mask=d_ok[:, None] & (cols[None, :] < L), other=0.0)
    if INTERPRET:  # the CPU interpreter's bf16 dot is wrong: fp32 operands there only
        q = q.to(tl.float32)
        kt = kt.to(tl.float32)
    s = tl.dot(q, kt) * scale
    tl.store(s_ptr + bh * L * L + rows[:, None].to(tl.int64) * L + cols[None, :], s,
             mask=(rows[:, None] < L) & (cols[None, :] < L))


@triton.jit
def _softmax_rows(s_ptr, p_ptr, L, BLOCK: tl.constexpr, INTERPRET: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * L
    offs = tl.arange(0, BLOCK)
    run_max = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, L, BLOCK):
        cols = start + offs
        run_max = tl.maximum(run_max, tl.load(s_ptr + base + cols, mask=cols < L, other=float("-inf")))
    row_max = tl.max(run_max, axis=0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, L, BLOCK):
        cols = start + offs
        s = tl.load(s_ptr + base + cols, mask=cols < L, other=float("-inf"))
        acc += tl.exp(s - row_max)
    inv = 1.0 / tl.sum(acc, axis=0)
    for start in range(0, L, BLOCK):
        cols = start + offs
        s = tl.load(s_ptr + base + cols, mask=cols < L, other=float("-inf"))
        tl.store(p_ptr + base + cols, _to_bf16(tl.exp(s - row_max) * inv, INTERPRET), mask=cols < L)


@triton.jit
def _pv(p_ptr, v_ptr, o_ptr, L, D,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, INTERPRET: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    ds = tl.arange(0, BLOCK_D)
    d_ok = ds < D
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start in range(0, L, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        p = tl.load(p_ptr + bh * L * L + rows[:, None].to(tl.int64) * L + keys[None, :],
                    mask=(rows[:, None] < L) & (keys[None, :] < L), other=0.0)
        v = tl.load(v_ptr + bh * L * D + keys[:, None] * D + ds[None, :],
                    mask=(keys[:, None] < L) & d_ok[None, :], other=0.0)
        if INTERPRET:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = tl.dot(p, v, acc)
    tl.store(o_ptr + bh * L * D + rows[:, None] * D + ds[None, :], _to_bf16(acc, INTERPRET),
             mask=(rows[:, None] < L) & d_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        B, H, L, D = q.shape
        interpret = not q.is_cuda
        o = torch.empty((B, H, L, D), dtype=torch.bfloat16, device=q.device)
        s = torch.empty((B * H, L, L), dtype=torch.float32, device=q.device)
        p = torch.empty((B * H, L, L), dtype=torch.bfloat16, device=q.device)
        block_d = max(16, triton.next_power_of_2(D))
        _scores[(triton.cdiv(L, 32), triton.cdiv(L, 32), B * H)](
            q, k, s, L, D, 1.0 / math.sqrt(D), BLOCK_M=32, BLOCK_N=32, BLOCK_D=block_d,
            INTERPRET=interpret, num_warps=4, num_stages=1)
        _softmax_rows[(B * H * L,)](s, p, L, BLOCK=512, INTERPRET=interpret, num_warps=4)
        _pv[(triton.cdiv(L, 32), B * H)](p, v, o, L, D, BLOCK_M=32, BLOCK_N=32, BLOCK_D=block_d,
                                          INTERPRET=interpret, num_warps=4, num_stages=1)
        return o
