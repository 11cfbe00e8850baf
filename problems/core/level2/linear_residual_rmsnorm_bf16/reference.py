"""Output projection + residual add + RMSNorm in bfloat16: where a Llama decoder layer's sublayer ends
and the next norm begins.

    h = residual + x @ W^T                  (the updated residual stream, an output)
    y = weight * rms_normalize(h)           (the next sublayer's normalised input, an output)
    rms_normalize(h) = h / sqrt(mean(h^2) + eps)   over the last dimension, in fp32, eps 1e-5

Written as Hugging Face's Llama code computes it: o_proj (or down_proj), the residual add in bf16,
then LlamaRMSNorm (upcast to fp32, normalise, round to bf16, multiply by the bf16 weight). A fused
kernel adds the residual in the GEMM's epilogue and normalises whole rows there, writing h and y once.
"""

import torch
from torch import nn

EPS = 1e-5


class Model(nn.Module):
    def __init__(self, in_features: int, hidden_size: int):
        super().__init__()
        # Default nn.Linear initialization (uniform in +-1/sqrt(in_features)), made in bf16.
        self.proj = nn.Linear(in_features, hidden_size, bias=False, dtype=torch.bfloat16)
        # RMSNorm weight away from ones, so that a kernel ignoring it fails.
        self.norm_weight = nn.Parameter((1.0 + 0.5 * torch.randn(hidden_size)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = residual + self.proj(x)
        hf = h.to(torch.float32)
        variance = hf.pow(2).mean(-1, keepdim=True)
        normed = hf * torch.rsqrt(variance + EPS)
        y = self.norm_weight * normed.to(torch.bfloat16)
        return h, y


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, N, **params):
    x = torch.randn(M, K, dtype=torch.bfloat16)  # attention (or MLP) output before the projection
    residual = (torch.randn(M, N) * 2.0).to(torch.bfloat16)  # the residual stream, grown over layers
    return [x, residual]
