"""float16 GEMM in Triton: tiles of C accumulated in float32 with tl.dot, cast to float16 at the
end. Loads are masked on every edge, so any M, N, K work. Tiles are grouped along M so that
neighbouring programs share panels of B in L2."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _gemm_fp16(a_ptr, b_ptr, c_ptr, M, N, K,
               stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
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
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None].to(tl.int64) * stride_bk + cols[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptrs, mask=(ks[:, None] + k0 < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc=acc, out_dtype=tl.float32)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        M, K = A.shape
        K2, N = B.shape
        if K != K2:
            raise ValueError(f"inner dimensions differ: A is {tuple(A.shape)}, B is {tuple(B.shape)}")
        C = torch.empty((M, N), dtype=torch.float16, device=A.device)
        if M == 0 or N == 0:
            return C
        if A.is_cuda:
            bm, bn, bk, warps, stages = 128, 128, 64, 8, 3
        else:  # Triton's interpreter: small tiles keep it quick
            bm, bn, bk, warps, stages = 32, 32, 32, 4, 1
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        _gemm_fp16[grid](A, B, C, M, N, K,
                         A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                         num_warps=warps, num_stages=stages)
        return C
