"""Broken on purpose: the lazy FP8 GEMM. It dequantizes both operands to bfloat16 (each fp8 value
times its float32 scale, rounded to bf16) and runs a bf16 GEMM with float32 accumulation, as if
the scales could be folded into bf16 operands for free. Rounding every dequantized operand to bf16's
8-bit significand costs up to 2^-9 relative per element, about 3e-3 of the output's size, far
beyond this problem's atol near small outputs: it must be judged incorrect, on the CPU too."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _bf16_gemm_nt(a_ptr, b_ptr, y_ptr, M, N, K,
                  stride_am, stride_ak, stride_bn, stride_bk, stride_ym, stride_yn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  BF16_DOT: tl.constexpr):
    """y = a @ b^T for bf16 a (M, K) and b (N, K), float32 accumulation, bf16 y."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        a = tl.load(a_ptr + rows[:, None].to(tl.int64) * stride_am + kk[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + cols[None, :].to(tl.int64) * stride_bn + kk[:, None] * stride_bk,
                    mask=(cols[None, :] < N) & (kk[:, None] < K), other=0.0)  # (BLOCK_K, BLOCK_N) tile of b^T
        if BF16_DOT:  # bf16 tensor cores, float32 accumulation
            acc = tl.dot(a, b, acc=acc, out_dtype=tl.float32)
        else:  # Triton's interpreter mis-multiplies bf16 in tl.dot; the same products are exact in fp32
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc=acc, input_precision="ieee",
                         out_dtype=tl.float32)
    y_ptrs = y_ptr + rows[:, None].to(tl.int64) * stride_ym + cols[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(tl.bfloat16), mask=(rows[:, None] < M) & (cols[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        # same buffers as the reference, so its weights are copied in
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.uint8).view(torch.float8_e4m3fn))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))

    def forward(self, x: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        # the lazy step: fold the scales into the operands and round them to bf16
        a = (x.to(torch.float32) * x_scale).to(torch.bfloat16)
        b = (self.weight.to(torch.float32) * self.weight_scale[:, None]).to(torch.bfloat16)
        M, K = a.shape
        N = b.shape[0]
        y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
        if M == 0 or N == 0:
            return y
        bm, bn, bk = (64, 128, 64) if x.is_cuda else (32, 32, 32)
        grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
        _bf16_gemm_nt[grid](a, b, y, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            y.stride(0), y.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                            BF16_DOT=x.is_cuda)
        return y
