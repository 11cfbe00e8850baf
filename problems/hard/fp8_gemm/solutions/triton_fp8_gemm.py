"""Row-wise scaled FP8 GEMM in Triton: y = (x * x_scale) @ (W * w_scale[:, None])^T, bf16 out.

The float8_e4m3fn tiles go straight into tl.dot (FP8 tensor cores, float32 result); the two scales
are applied once per output in the epilogue, so the operands are never dequantized. W is (N, K)
row-major, i.e. already K-major, which is the layout Hopper's FP8 wgmma wants for both operands:
its tiles are read through strides, with no transpose.

Accuracy: Hopper's FP8 wgmma accumulates in fewer bits than float32, and Triton's sm_90 default
leaves the whole K there. `max_num_imprecise_acc=PROMOTE` makes Triton's wgmma lowering keep the
partial sum in a separate register tile and add it into the float32 accumulator every PROMOTE
elements of K. Measured on an H200 (Triton 3.6): no promotion is ~10-20x over this problem's
tolerance, promotion every 128 sits right at it (worst |err|/(atol+rtol|ref|) 0.86-1.05), every 64
leaves only bf16 rounding flips (0.76), at ~15% of the speed of every 128. Hence 64.

Two tilings of the same kernel:
  - prefill (M > 64): a 256 x 128 (or 128 x 128) tile of y per program, BLOCK_K 128, 8 warps,
    x as the A operand, grouped program order so that a group of M tiles shares W tiles in L2;
  - decode (M <= 64, "swap AB"): y^T = W x^T, so N fills the 64-row MMA dimension and the few
    tokens a 16..64-wide one (any M tile would be mostly padding); it streams W, memory-bound.
K rows that are not 16-byte aligned (K % 16 != 0) are zero-padded along K (W once, cached; x per
call) so that loads are vectorized and pipelined; the ragged K tail of the last tile is masked.

On the CPU (Triton's interpreter) the fp8 tiles are widened to float32 before tl.dot (EXACT_DOT):
the interpreter's low-precision dots are not to be trusted. Everything else is the same code.
"""

import torch
import triton
import triton.language as tl
from torch import nn

FP8 = torch.float8_e4m3fn


@triton.jit
def _scaled_fp8_gemm(a_ptr, b_ptr, a_scale_ptr, b_scale_ptr, y_ptr, P, Q, K,
                     stride_ap, stride_ak, stride_bq, stride_bk, stride_yp, stride_yq,
                     BLOCK_P: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                     PROMOTE: tl.constexpr, GROUP_P: tl.constexpr, EXACT_DOT: tl.constexpr):
    """acc[p, q] = sum_k a[p, k] * b[q, k] (fp8 a (P, K) and b (Q, K), both K-major), then
    y[p, q] = bf16(acc * a_scale[p] * b_scale[q]). y is addressed through its own strides, so the
    decode tiling writes y^T by passing y's strides swapped."""
    pid = tl.program_id(0)
    num_p = tl.cdiv(P, BLOCK_P)
    num_q = tl.cdiv(Q, BLOCK_Q)
    # grouped order: GROUP_P consecutive P tiles walk the Q tiles together (L2 reuse of b)
    per_group = GROUP_P * num_q
    first_p = (pid // per_group) * GROUP_P
    group_rows = min(num_p - first_p, GROUP_P)
    pid_p = first_p + (pid % per_group) % group_rows
    pid_q = (pid % per_group) // group_rows

    rows = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
    cols = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    row_ok = rows < P
    col_ok = cols < Q
    # out-of-range rows/cols read row 0 instead (never stored), so the loads need no P/Q mask
    safe_rows = tl.where(row_ok, rows, 0).to(tl.int64)
    safe_cols = tl.where(col_ok, cols, 0).to(tl.int64)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + safe_rows[:, None] * stride_ap + ks[None, :] * stride_ak  # (BLOCK_P, BLOCK_K)
    b_ptrs = b_ptr + safe_cols[None, :] * stride_bq + ks[:, None] * stride_bk  # b^T (BLOCK_K, BLOCK_Q)

    acc = tl.zeros((BLOCK_P, BLOCK_Q), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_left = K - k0
        a = tl.load(a_ptrs, mask=ks[None, :] < k_left, other=0.0)  # zeros past the K tail
        b = tl.load(b_ptrs, mask=ks[:, None] < k_left, other=0.0)
        if EXACT_DOT:
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc=acc, input_precision="ieee",
                         out_dtype=tl.float32)
        else:
            # FP8 tensor cores; partial sums are promoted to the float32 acc every PROMOTE of K
            acc = tl.dot(a, b, acc=acc, out_dtype=tl.float32, max_num_imprecise_acc=PROMOTE)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    a_scale = tl.load(a_scale_ptr + rows, mask=row_ok, other=0.0)
    b_scale = tl.load(b_scale_ptr + cols, mask=col_ok, other=0.0)
    y_ptrs = y_ptr + rows[:, None].to(tl.int64) * stride_yp + cols[None, :].to(tl.int64) * stride_yq
    tl.store(y_ptrs, (acc * a_scale[:, None] * b_scale[None, :]).to(tl.bfloat16),
             mask=row_ok[:, None] & col_ok[None, :])


def _pad_k(t: torch.Tensor, k_padded: int) -> torch.Tensor:
    """t (rows, K) fp8, zero-padded on the right to (rows, k_padded); fp8 0x00 is +0.0."""
    t = t.contiguous()
    if t.shape[1] == k_padded:
        return t
    return torch.nn.functional.pad(t.view(torch.uint8), (0, k_padded - t.shape[1])).view(FP8)


def _config(M: int, on_gpu: bool) -> dict:
    """Tiling by M: prefill (x is the MMA's A operand) or decode (swap AB, W is)."""
    if not on_gpu:  # the interpreter: small tiles, the same two tilings
        if M <= 64:
            return dict(swap=True, BLOCK_P=32, BLOCK_Q=16, BLOCK_K=32, GROUP_P=4, num_warps=4, num_stages=1)
        return dict(swap=False, BLOCK_P=32, BLOCK_Q=32, BLOCK_K=32, GROUP_P=4, num_warps=4, num_stages=1)
    if M <= 64:  # decode: 64 W rows x (16..64) tokens per program, a deep pipeline over W
        return dict(swap=True, BLOCK_P=64, BLOCK_Q=max(16, triton.next_power_of_2(M)), BLOCK_K=256,
                    GROUP_P=8, num_warps=4, num_stages=4)
    return dict(swap=False, BLOCK_P=256 if M > 128 else 128, BLOCK_Q=128, BLOCK_K=128, GROUP_P=8,
                num_warps=8, num_stages=3)


# float32 promotion interval of the FP8 tensor-core partial sums along K (elements)
PROMOTE_EVERY = 64


class ModelNew(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        # the reference's buffers (same names, shapes and dtypes); its values are copied in
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.uint8).view(FP8))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))
        self._padded = None  # (key, W zero-padded along K), made on first use

    def _weight_padded(self, k_padded: int) -> torch.Tensor:
        w = self.weight
        if w.shape[1] == k_padded and w.is_contiguous():
            return w
        key = (w.data_ptr(), w._version, w.device, k_padded)
        if self._padded is None or self._padded[0] != key:
            self._padded = (key, _pad_k(w, k_padded))
        return self._padded[1]

    def forward(self, x: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        M, K = x.shape
        N = self.weight.shape[0]
        y = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
        if M == 0 or N == 0:
            return y
        on_gpu = x.is_cuda
        k_padded = (K + 15) // 16 * 16 if on_gpu else K  # 16-byte rows for vectorized loads
        xk = _pad_k(x, k_padded)
        wk = self._weight_padded(k_padded)
        xs = x_scale.reshape(M).to(torch.float32).contiguous()
        ws = self.weight_scale.to(torch.float32).contiguous()

        cfg = _config(M, on_gpu)
        if cfg.pop("swap"):  # y^T (N, M) = W x^T: P runs over N, Q over M, y^T's strides are y's swapped
            a, b, a_s, b_s, P, Q, s_p, s_q = wk, xk, ws, xs, N, M, y.stride(1), y.stride(0)
        else:
            a, b, a_s, b_s, P, Q, s_p, s_q = xk, wk, xs, ws, M, N, y.stride(0), y.stride(1)
        grid = (triton.cdiv(P, cfg["BLOCK_P"]) * triton.cdiv(Q, cfg["BLOCK_Q"]),)
        _scaled_fp8_gemm[grid](a, b, a_s, b_s, y, P, Q, k_padded,
                               a.stride(0), a.stride(1), b.stride(0), b.stride(1), s_p, s_q,
                               PROMOTE=min(PROMOTE_EVERY, cfg["BLOCK_K"]), EXACT_DOT=not on_gpu, **cfg)
        return y
