"""Fused QKV projection + rotary position embedding (RoPE) on q and k, in bfloat16.

    qkv = x @ W_qkv^T                         (T, (NQ + 2 * NKV) * D), split into q, k, v heads
    angle[t, i] = position[t] * inv_freq[i],   inv_freq[i] = theta ** (-2 i / D),  i < D / 2
    rope(u)[t, h, i]         = u[t, h, i] * cos(angle[t, i]) - u[t, h, i + D/2] * sin(angle[t, i])
    rope(u)[t, h, i + D/2]   = u[t, h, i + D/2] * cos(angle[t, i]) + u[t, h, i] * sin(angle[t, i])
    returns rope(q), rope(k), v

The "rotate half" (GPT-NeoX / Llama) convention, applied in fp32 to the bf16 projections and rounded
once, as vLLM's native path does. Written as separate ops: the projection is materialised, the
angles, cos and sin tables are built, q and k are rotated. A fused kernel rotates q and k in the
GEMM's epilogue (the two halves of a head in one tile) and computes cos and sin on the fly.
"""

import torch
from torch import nn


def rotate_half(u: torch.Tensor) -> torch.Tensor:
    half = u.shape[-1] // 2
    return torch.cat((-u[..., half:], u[..., :half]), dim=-1)


class Model(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int, head_dim: int, theta: float):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        # Default nn.Linear initialization (uniform in +-1/sqrt(hidden_size)), made in bf16; q, k
        # and v projections stacked in that order (vLLM's QKVParallelLinear), no bias.
        self.qkv_proj = nn.Linear(hidden_size, (num_heads + 2 * num_kv_heads) * head_dim, bias=False,
                                  dtype=torch.bfloat16)
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq)  # (D / 2,) float32

    def forward(self, x: torch.Tensor, positions: torch.Tensor):
        T = x.shape[0]
        NQ, NKV, D = self.num_heads, self.num_kv_heads, self.head_dim
        qkv = self.qkv_proj(x)  # (T, (NQ + 2 NKV) D) bf16
        q, k, v = qkv.split([NQ * D, NKV * D, NKV * D], dim=-1)
        q, k, v = q.view(T, NQ, D), k.view(T, NKV, D), v.view(T, NKV, D)
        angle = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]  # (T, D / 2) fp32
        cos = torch.cat((angle.cos(), angle.cos()), dim=-1)[:, None, :]  # (T, 1, D)
        sin = torch.cat((angle.sin(), angle.sin()), dim=-1)[:, None, :]

        def rope(u: torch.Tensor) -> torch.Tensor:
            u = u.to(torch.float32)
            return (u * cos + rotate_half(u) * sin).to(torch.bfloat16)

        return rope(q), rope(k), v


def get_init_inputs(Hd, NQ, NKV, D, theta, **params):
    return [Hd, NQ, NKV, D, theta]


def get_inputs(B, S, Hd, P, **params):
    x = torch.randn(B * S, Hd, dtype=torch.bfloat16)  # the input norm's output, B sequences of S tokens
    # Each of the B sequences continues from its own random offset (chunked prefill with a KV
    # cache), so positions are increasing within a sequence and jump between sequences.
    start = torch.randint(0, P - S + 1, (B, 1))
    positions = (start + torch.arange(S)[None, :]).reshape(B * S)  # (T,) int64
    return [x, positions]
