"""Rotary embedding, causal grouped-query attention and the output projection, bfloat16.

    o = o_proj(softmax(rope(q) rope(k)^T / sqrt(D) + causal mask) v)

q (B, S, NH, D), k and v (B, S, NKV, D) are the outputs of the q/k/v projections of S tokens at
positions 0..S-1 (a prefill), in the layout the projections write them (token-major, heads
inside). RoPE in Llama's "rotate half" form with base theta: for position p and i < D/2 the angle
is p * theta^(-2i/D) and the pair (x_i, x_{i + D/2}) becomes (x_i cos - x_{i+D/2} sin,
x_{i+D/2} cos + x_i sin), computed in float32 and rounded to bfloat16 once. Query head j attends
with key/value head j // (NH // NKV); token s sees tokens 0..s. The heads' outputs, concatenated
per token (NH * D), go through o_proj, an nn.Linear (Hd, NH * D) weight without bias: the result
o is (B, S, Hd) bfloat16.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x (B, S, heads, D) at positions 0..S-1, rotate-half form, float32 math, one rounding."""
    S, D = x.shape[1], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D))
    angles = torch.arange(S, dtype=torch.float32, device=x.device)[:, None] * inv_freq[None, :]  # (S, D/2)
    cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]  # broadcast over heads
    xf = x.float()
    x1, x2 = xf[..., : D // 2], xf[..., D // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


class Model(nn.Module):
    def __init__(self, NH: int, D: int, Hd: int, theta: float):
        super().__init__()
        self.theta = theta
        self.o_proj = nn.Linear(NH * D, Hd, bias=False, dtype=torch.bfloat16)
        with torch.no_grad():  # ~ N(0, 1/fan_in), as a trained projection
            w = torch.randn(self.o_proj.weight.shape, dtype=torch.bfloat16)
            self.o_proj.weight.copy_(w.mul_(1.0 / math.sqrt(NH * D)))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        B, S, NH, D = q.shape
        NKV = k.shape[2]
        q = rope(q, self.theta).transpose(1, 2)  # (B, NH, S, D)
        k = rope(k, self.theta).transpose(1, 2)
        v = v.transpose(1, 2)
        # query head j reads key/value head j // (NH // NKV)
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(D))
        return self.o_proj(a.transpose(1, 2).reshape(B, S, NH * D))


def get_init_inputs(NH, D, Hd, theta, **params):
    return [NH, D, Hd, theta]


def get_inputs(B, S, NH, NKV, D, **params):
    # q and k with a common per-channel offset, as trained q/k projections have: with RoPE it
    # favours nearby tokens a little (about 600 tokens carry the weight at S = 2048); v of unit size.
    bias = 0.5 * torch.randn(D)
    q = (torch.randn(B, S, NH, D) + bias).to(torch.bfloat16)
    k = (torch.randn(B, S, NKV, D) + bias).to(torch.bfloat16)
    v = torch.randn(B, S, NKV, D, dtype=torch.bfloat16)
    return [q, k, v]
