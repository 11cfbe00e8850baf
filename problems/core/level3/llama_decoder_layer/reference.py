"""One pre-norm Llama decoder layer (Llama-3 / Mistral / Qwen2 style), forward, bfloat16.

    h = x + o_proj(attn(rope(q_proj(n1)), rope(k_proj(n1)), v_proj(n1)))     n1 = rms_norm_1(x)
    y = h + down_proj(silu(gate_proj(n2)) * up_proj(n2))                       n2 = rms_norm_2(h)

x is (B, S, Hd) bfloat16, the tokens of B sequences at positions 0..S-1 (a prefill). RMSNorm:
x * rsqrt(mean(x^2 over Hd) + 1e-5) * weight, computed in float32 and rounded to bfloat16 once.
Attention: NH query heads and NKV key/value heads of dimension D (grouped-query attention, query
head j reads key/value head j // (NH // NKV)), causal, softmax scale 1/sqrt(D). RoPE on q and k in
Llama's "rotate half" form with base theta: for position p and i < D/2, the angle is
p * theta^(-2i/D), and the pair (x_i, x_{i + D/2}) is rotated by it, computed in float32 and rounded
to bfloat16 once. Projections are nn.Linear layers without biases (y = x @ W^T), accumulated in
float32, rounded to bfloat16.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x (B, heads, S, D) at positions 0..S-1, rotate-half form, float32 math, one rounding."""
    S, D = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D))
    angles = torch.arange(S, dtype=torch.float32, device=x.device)[:, None] * inv_freq[None, :]  # (S, D/2)
    cos, sin = angles.cos(), angles.sin()
    xf = x.float()
    x1, x2 = xf[..., : D // 2], xf[..., D // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


class Model(nn.Module):
    def __init__(self, Hd: int, NH: int, NKV: int, D: int, I: int, theta: float):
        super().__init__()
        self.NH, self.NKV, self.D, self.theta, self.eps = NH, NKV, D, theta, 1e-5
        bf16 = torch.bfloat16
        self.input_layernorm = nn.Parameter(torch.empty(Hd, dtype=bf16), requires_grad=False)
        self.post_attention_layernorm = nn.Parameter(torch.empty(Hd, dtype=bf16), requires_grad=False)
        self.q_proj = nn.Linear(Hd, NH * D, bias=False, dtype=bf16)
        self.k_proj = nn.Linear(Hd, NKV * D, bias=False, dtype=bf16)
        self.v_proj = nn.Linear(Hd, NKV * D, bias=False, dtype=bf16)
        self.o_proj = nn.Linear(NH * D, Hd, bias=False, dtype=bf16)
        self.gate_proj = nn.Linear(Hd, I, bias=False, dtype=bf16)
        self.up_proj = nn.Linear(Hd, I, bias=False, dtype=bf16)
        self.down_proj = nn.Linear(I, Hd, bias=False, dtype=bf16)
        with torch.no_grad():
            # Norm weights away from ones (a kernel that drops them fails); projections ~ N(0, 1/fan_in),
            # so every branch adds terms of about unit size to the residual stream.
            for w in (self.input_layernorm, self.post_attention_layernorm):
                w.copy_(1.0 + 0.3 * torch.randn(Hd))
            for layer in (self.q_proj, self.k_proj, self.v_proj, self.o_proj,
                          self.gate_proj, self.up_proj, self.down_proj):
                w = torch.randn(layer.weight.shape, dtype=bf16)
                layer.weight.copy_(w.mul_(1.0 / math.sqrt(layer.in_features)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, _ = x.shape
        NH, NKV, D = self.NH, self.NKV, self.D
        n1 = rms_norm(x, self.input_layernorm, self.eps)
        q = self.q_proj(n1).view(B, S, NH, D).transpose(1, 2)
        k = self.k_proj(n1).view(B, S, NKV, D).transpose(1, 2)
        v = self.v_proj(n1).view(B, S, NKV, D).transpose(1, 2)
        q, k = rope(q, self.theta), rope(k, self.theta)
        # query head j reads key/value head j // (NH // NKV)
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(D))
        h = x + self.o_proj(a.transpose(1, 2).reshape(B, S, NH * D))
        n2 = rms_norm(h, self.post_attention_layernorm, self.eps)
        return h + self.down_proj(F.silu(self.gate_proj(n2)) * self.up_proj(n2))


def get_init_inputs(Hd, NH, NKV, D, I, theta, **params):
    return [Hd, NH, NKV, D, I, theta]


def get_inputs(B, S, Hd, **params):
    # the residual stream of a layer deep in the model: entries of about unit size, a non-zero mean
    return [torch.randn(B, S, Hd, dtype=torch.bfloat16) + 0.5]
