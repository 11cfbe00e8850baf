"""Linear + bias + residual add + LayerNorm in bfloat16: a post-norm Transformer's sublayer output.

    y = LayerNorm(x @ W^T + b + residual)      (over the last dimension, eps 1e-12, affine)

This is BERT's BertOutput / BertSelfOutput (dense, dropout -- inactive at inference -- then
LayerNorm(hidden + input_tensor)), written as the separate ops a user writes. A fused kernel adds
the bias and the residual to the fp32 accumulator and normalises whole output rows in the epilogue.
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Default nn.Linear initialization (uniform in +-1/sqrt(in_features)), made in bf16.
        self.dense = nn.Linear(in_features, out_features, bias=True, dtype=torch.bfloat16)
        self.norm = nn.LayerNorm(out_features, eps=1e-12, dtype=torch.bfloat16)
        # Away from the default (ones, zeros), so that a kernel ignoring the affine part fails.
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.randn(out_features))
            self.norm.bias.copy_(0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = self.dense(x)
        return self.norm(h + residual)


def get_init_inputs(K, N, **params):
    return [K, N]


def get_inputs(M, K, N, **params):
    x = torch.randn(M, K, dtype=torch.bfloat16)
    # The residual stream, with a non-zero mean so that the LayerNorm's mean subtraction matters.
    residual = (torch.randn(M, N) + 0.5).to(torch.bfloat16)
    return [x, residual]
