"""Fused Linear + exact GELU in Triton: a float16 GEMM of x (M, K) with W^T accumulated in
float32 by tl.dot, with the bias add and the erf GELU applied in registers before the one store.
W (N, K) is read through its strides as the (K, N) operand, so it is never transposed in memory.
Loads are masked on every edge, so any M, N, K work."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _linear_gelu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                 stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_in_group = GROUP_M * tiles_n
    group = pid // tiles_in_group
    first_m = group * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % tiles_in_group) % group_rows
    pid_n = (pid % tiles_in_group) // group_rows

    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows[:, None].to(tl.int64) * stride_xm + ks[None, :] * stride_xk
    # (BLOCK_K, BLOCK_N) view of W^T: element (k, n) is W[n, k]
    w_ptrs = w_ptr + ks[:, None] * stride_wk + cols[None, :].to(tl.int64) * stride_wn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rows[:, None] < M) & (ks[None, :] + k0 < K), other=0.0)
        w = tl.load(w_ptrs, mask=(ks[:, None] + k0 < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc=acc, out_dtype=tl.float32)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    bias = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    z = acc + bias[None, :]
    y = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))
    y_ptrs = y_ptr + rows[:, None].to(tl.int64) * stride_ym + cols[None, :] * stride_yn
    tl.store(y_ptrs, y.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Holds the parameters (linear.weight, linear.bias) so the reference's state_dict loads;
        # the module itself is never called.
        self.linear = nn.Linear(in_features, out_features, bias=True, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        b = self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), dtype=torch.float16, device=x.device)
        if M == 0 or N == 0:
            return y
        if x.is_cuda:
            bm, bn, bk, warps, stages = 128, 128, 64, 8, 3
        else:  # Triton's interpreter: small tiles keep it quick
            bm, bn, bk, warps, stages = 32, 32, 32, 4, 1
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _linear_gelu[grid](x, w, b, y, M, N, K,
                           x.stride(0), x.stride(1), w.stride(0), w.stride(1), y.stride(0), y.stride(1),
                           BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                           num_warps=warps, num_stages=stages)
        return y
