"""W4A16 GEMM: y = x @ dequant(W)^T with 4-bit group-quantized weights (group size 128 along K).

Layout (nn.Linear orientation: the weight is W (N, K), out_features x in_features):

- x        bfloat16 (M, K), contiguous; forward argument.
- qweight  int32 (N, K // 8): W's 4-bit codes packed 8 per int32 along K. Word qweight[n, j]
           holds k = 8*j + i in bits [4*i, 4*i + 4), i = 0..7: sequential order, lowest nibble
           first (not AWQ's interleaved 0,2,4,6,1,3,5,7 order). Codes are unsigned, 0..15; a word
           whose top nibble is >= 8 is a negative int32, so unpack with `(word >> 4*i) & 0xF`.
- scales   bfloat16 (N, K // 128): one scale per output row and group of 128 consecutive k.
- qzeros   uint8 (N, K // 128): one integer zero point per row and group, 0..15, unpacked.

    w[n, k] = (q[n, k] - qzeros[n, k // 128]) * scales[n, k // 128]       (asymmetric, AWQ/GPTQ)
    y[m, n] = sum_k x[m, k] * w[n, k]                                      (bfloat16 out)

The reference unpacks with shifts and masks, dequantizes in float32 and accumulates in float32;
only the final result is rounded to bfloat16.

The quantized weight is module state built in the constructor, as in a real deployment: a
checkpoint's packed weights are loaded once and reused for every batch, and a serving engine may
repack them offline (Marlin, tinygemm and ExLlama all do). It is made the way a real checkpoint
is: a float weight is drawn, each group of 128 gets a min/max (asymmetric) scale and integer zero
point, and the weight is rounded to [0, 15] with that scale. The scale is rounded to bfloat16
before the codes are computed, so the codes are the best ones for the scale actually stored.
"""

import torch
from torch import nn

GROUP_SIZE = 128
_ROWS_PER_CHUNK = 1024  # quantize this many output rows at a time: bounded temporaries on big shapes


def _quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Min/max asymmetric int4 quantization of a float32 (rows, K) block, groups of 128 along K.

    Returns (packed int32 (rows, K // 8), scales bf16 (rows, K // 128), zeros uint8 (rows, K // 128)).
    """
    rows, k = w.shape
    g = w.view(rows, k // GROUP_SIZE, GROUP_SIZE)
    # the range always contains 0, so the zero point is an integer inside [0, 15] (GPTQ/AWQ convention)
    lo = g.amin(dim=-1).clamp(max=0.0)
    hi = g.amax(dim=-1).clamp(min=0.0)
    scale = ((hi - lo) / 15.0).clamp(min=1e-8).to(torch.bfloat16)
    s = scale.float()
    zero = torch.round(-lo / s).clamp(0, 15)
    q = torch.clamp(torch.round(g / s[..., None]) + zero[..., None], 0, 15).to(torch.int64)
    # pack 8 codes per int32 along K, code i of a word in bits [4i, 4i+4)
    q = q.view(rows, k // 8, 8)
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    word = (q << shifts).sum(dim=-1)  # 0 .. 2**32 - 1, exact in int64
    word = torch.where(word >= 2**31, word - 2**32, word).to(torch.int32)  # same bits as an int32
    return word, scale, zero.to(torch.uint8)


class Model(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        if K % GROUP_SIZE:
            raise ValueError(f"K={K} must be a multiple of the group size {GROUP_SIZE}")
        self.K, self.N = K, N
        qweight = torch.empty(N, K // 8, dtype=torch.int32)
        scales = torch.empty(N, K // GROUP_SIZE, dtype=torch.bfloat16)
        qzeros = torch.empty(N, K // GROUP_SIZE, dtype=torch.uint8)
        # The float weight: rows of different magnitude (log-normal), about 1/sqrt(K) each, so
        # that y has entries of about unit size. Its codes, scales and zeros are what is kept.
        row_std = torch.exp(0.3 * torch.randn(N)) / K ** 0.5
        for start in range(0, N, _ROWS_PER_CHUNK):
            stop = min(start + _ROWS_PER_CHUNK, N)
            w = torch.randn(stop - start, K) * row_std[start:stop, None]
            qweight[start:stop], scales[start:stop], qzeros[start:stop] = _quantize_rows(w)
        self.register_buffer("qweight", qweight)
        self.register_buffer("scales", scales)
        self.register_buffer("qzeros", qzeros)

    def dequantized_weight(self) -> torch.Tensor:
        """W (N, K) in float32: unpack the nibbles, subtract the zero point, multiply by the scale."""
        N, K = self.N, self.K
        shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=self.qweight.device)
        q = (self.qweight[:, :, None] >> shifts) & 0xF  # (N, K/8, 8), k = 8*j + i
        q = q.reshape(N, K // GROUP_SIZE, GROUP_SIZE).float()
        z = self.qzeros.float()[:, :, None]
        s = self.scales.float()[:, :, None]
        return ((q - z) * s).reshape(N, K)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.dequantized_weight()
        return torch.matmul(x.float(), w.t()).to(torch.bfloat16)


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, **params):
    return [torch.randn(M, K, dtype=torch.float32).to(torch.bfloat16)]
