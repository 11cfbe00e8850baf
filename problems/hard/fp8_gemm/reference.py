"""Row-wise scaled FP8 matrix multiply with a bfloat16 output.

    y = (x_fp8 * x_scale) @ (w_fp8 * w_scale[:, None])^T

x_fp8 (M, K) and w_fp8 (N, K) are float8_e4m3fn; x_scale (M, 1) is one float32 scale per row of
x (per token), w_scale (N,) one float32 scale per output channel. The reference dequantizes both
operands to float32, multiplies with float32 accumulation and rounds the result to bfloat16 once.
"""

import math

import torch
from torch import nn

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite float8_e4m3fn value


def quantize_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax quantization of each row to float8_e4m3fn: t ~= q * scale.

    scale = absmax(row) / 448, so each row's largest entry lands on the largest fp8 value. The clamp
    guards against rounding past 448 (float8_e4m3fn has no infinity: overflow would be NaN).
    """
    t = t.to(torch.float32)
    scale = t.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / FP8_MAX
    q = (t / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale


def log_uniform(shape: tuple[int, ...], ratio: float) -> torch.Tensor:
    """Factors spread log-uniformly over [1/ratio, ratio]: rows (channels) of different sizes, so
    every row's (channel's) own scale matters."""
    return torch.exp((torch.rand(shape) * 2 - 1) * math.log(ratio))


class Model(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        # The weights are model state, as in a deployed FP8 checkpoint: quantized once, offline, per
        # output channel, and read by every call; the activations are quantized per token on the fly
        # by the layer before, so they (and their scales) are the forward's inputs. Drawn in bf16
        # like a trained layer's weights, entries ~ N(0, 1/K) times a per-channel factor in [1/2, 2].
        w = torch.randn(N, K) * (log_uniform((N, 1), 2.0) / math.sqrt(K))
        q, scale = quantize_rows(w.to(torch.bfloat16))
        self.register_buffer("weight", q)  # (N, K) float8_e4m3fn, row-major
        self.register_buffer("weight_scale", scale.reshape(N))  # (N,) float32

    def forward(self, x: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        x_deq = x.to(torch.float32) * x_scale  # (M, K) float32
        w_deq = self.weight.to(torch.float32) * self.weight_scale[:, None]  # (N, K) float32
        return torch.matmul(x_deq, w_deq.t()).to(torch.bfloat16)  # float32 accumulation, one rounding


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    # Activations drawn in bf16 (entries ~ N(0, 1) times a per-token factor in [1/2, 2]), then
    # quantized per token: output entries are of about unit size (per row and channel 1/4 to 4).
    x = (torch.randn(M, K) * log_uniform((M, 1), 2.0)).to(torch.bfloat16)
    x_fp8, x_scale = quantize_rows(x)
    return [x_fp8, x_scale]
