"""One GRU layer over a sequence (torch.nn.GRU's math, written out step by step), bfloat16 weights
and activations with a float32 hidden state.

For t = 0..T-1, with h_{-1} = h0 (float32):

    gi = x_t @ W_ih^T + b_ih                 (B, 3H): parts r, z, n
    gh = bf16(h_{t-1}) @ W_hh^T + b_hh       (B, 3H)
    r  = sigmoid(gi_r + gh_r)
    z  = sigmoid(gi_z + gh_z)
    n  = tanh(gi_n + r * gh_n)
    h_t = (1 - z) * n + z * h_{t-1}          float32
    y_t = bf16(h_t)

x (T, B, I) bfloat16 (time-major), W_ih (3H, I), W_hh (3H, H), b_ih, b_hh (3H) bfloat16, parts in
PyTorch's order (reset, update, new). The input projection of all T steps is one product, rounded
to bfloat16; the recurrent product of each step takes h_{t-1} rounded to bfloat16, accumulates in
float32 and is rounded to bfloat16; biases are added and the gates computed in float32.
Outputs: y (T, B, H) bfloat16 and the last hidden state h_{T-1} (B, H) float32.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, I: int, H: int):
        super().__init__()
        k = 1.0 / math.sqrt(H)  # nn.GRU's initialisation: uniform(-1/sqrt(H), 1/sqrt(H))

        def uniform(*shape):
            return nn.Parameter(((torch.rand(*shape) * 2 - 1) * k).to(torch.bfloat16), requires_grad=False)

        self.weight_ih = uniform(3 * H, I)
        self.weight_hh = uniform(3 * H, H)
        self.bias_ih = uniform(3 * H)
        self.bias_hh = uniform(3 * H)

    def forward(self, x: torch.Tensor, h0: torch.Tensor):
        T = x.shape[0]
        H = h0.shape[1]
        xg = F.linear(x, self.weight_ih)  # (T, B, 3H), all steps at once
        b_ih, b_hh = self.bias_ih.float(), self.bias_hh.float()
        h = h0
        y = torch.empty(T, *h0.shape, dtype=torch.bfloat16, device=x.device)
        for t in range(T):
            gi = xg[t].float() + b_ih
            gh = F.linear(h.to(torch.bfloat16), self.weight_hh).float() + b_hh
            r = torch.sigmoid(gi[:, :H] + gh[:, :H])
            z = torch.sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
            n = torch.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
            h = (1 - z) * n + z * h
            y[t] = h.to(torch.bfloat16)
        return y, h


def get_init_inputs(I, H, **params):
    return [I, H]


def get_inputs(T, B, I, H, **params):
    # a chunk of a longer stream: the state carried in from the previous chunk is not zero
    x = torch.randn(T, B, I).to(torch.bfloat16)
    h0 = 0.5 * torch.tanh(torch.randn(B, H))
    return [x, h0]
