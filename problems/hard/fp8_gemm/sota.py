"""SOTA line: torch._scaled_mm with row-wise scales, PyTorch's FP8 GEMM (cuBLASLt or its CUTLASS
row-wise kernel on Hopper; cuBLASLt on Blackwell): FP8 tensor cores, partial sums promoted to
float32 (use_fast_accum=False), the two scales applied in the epilogue, bf16 output.

torch._scaled_mm wants A row-major, B column-major (W (N, K) row-major is exactly that, as W.t()),
scale_a (M, 1) and scale_b (1, N) float32, and K and N multiples of 16. Where they are not, W and
its scales are zero-padded once (when the weights first reach forward: weights are model state, a
deployment pads them at load time), x is zero-padded along K on every call, and the extra output
columns are sliced away.
"""

import torch
from torch import nn

FP8 = torch.float8_e4m3fn


def available():
    if not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no torch._scaled_mm"
    if torch.version.hip:
        return "ROCm builds use float8_e4m3fnuz; this problem's data is float8_e4m3fn"
    if not torch.cuda.is_available():
        return "torch._scaled_mm's row-wise FP8 GEMM needs a CUDA GPU and none is available"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (8, 9):
        return f"FP8 tensor cores need compute capability 8.9 or newer; this GPU is {major}.{minor}"
    return True


def _round16(n: int) -> int:
    return (n + 15) // 16 * 16


def _pad_fp8(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """t zero-padded to (rows, cols); the fp8 bit pattern 0x00 is +0.0."""
    if tuple(t.shape) == (rows, cols):
        return t.contiguous()
    out = torch.zeros((rows, cols), dtype=torch.uint8, device=t.device).view(FP8)
    out[: t.shape[0], : t.shape[1]] = t
    return out


class Model(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        # the reference's buffers (same names and shapes), copied in after construction
        self.register_buffer("weight", torch.zeros(N, K, dtype=torch.uint8).view(FP8))
        self.register_buffer("weight_scale", torch.ones(N, dtype=torch.float32))
        self._packed = None  # (key, W padded (Np, Kp), scale_b (1, Np))

    def _packed_weight(self) -> tuple[torch.Tensor, torch.Tensor]:
        w, s = self.weight, self.weight_scale
        key = (w.data_ptr(), w._version, s.data_ptr(), s._version, w.device)
        if self._packed is None or self._packed[0] != key:
            N, K = w.shape
            Np, Kp = _round16(N), _round16(K)
            scale_b = torch.zeros((1, Np), dtype=torch.float32, device=s.device)
            scale_b[0, :N] = s
            self._packed = (key, _pad_fp8(w, Np, Kp), scale_b)
        return self._packed[1], self._packed[2]

    def forward(self, x: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        w, scale_b = self._packed_weight()
        M, K = x.shape
        N = self.weight.shape[0]
        a = _pad_fp8(x, M, w.shape[1])
        y = torch._scaled_mm(a, w.t(), scale_a=x_scale.reshape(M, 1).contiguous(), scale_b=scale_b,
                             out_dtype=torch.bfloat16, use_fast_accum=False)
        return y if y.shape[1] == N else y[:, :N]
