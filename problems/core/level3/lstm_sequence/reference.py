"""One LSTM layer over a sequence (torch.nn.LSTM's math, written out step by step), bfloat16
weights and activations with a float32 cell state.

For t = 0..T-1, with h_{-1} = h0 (bfloat16) and c_{-1} = c0 (float32):

    g   = x_t @ W_ih^T + h_{t-1} @ W_hh^T + b_ih + b_hh            (B, 4H): gates i, f, g, o
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)               float32
    h_t = sigmoid(o) * tanh(c_t)                                    rounded to bfloat16
    y_t = h_t

x (T, B, I) bfloat16 (time-major), W_ih (4H, I), W_hh (4H, H), b_ih, b_hh (4H) bfloat16, gates in
PyTorch's order (input, forget, cell, output). The input projection of all T steps is one
product, rounded to bfloat16 (it is the cuDNN / PyTorch way); the recurrent product of each step
accumulates in float32 and is rounded to bfloat16; the gate sums and the cell update are float32.
Outputs: y (T, B, H) bfloat16 and the last cell state c_{T-1} (B, H) float32.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, I: int, H: int):
        super().__init__()
        k = 1.0 / math.sqrt(H)  # nn.LSTM's initialisation: uniform(-1/sqrt(H), 1/sqrt(H))

        def uniform(*shape):
            return nn.Parameter(((torch.rand(*shape) * 2 - 1) * k).to(torch.bfloat16), requires_grad=False)

        self.weight_ih = uniform(4 * H, I)
        self.weight_hh = uniform(4 * H, H)
        self.bias_ih = uniform(4 * H)
        self.bias_hh = uniform(4 * H)

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor):
        T = x.shape[0]
        xg = F.linear(x, self.weight_ih)  # (T, B, 4H), all steps at once
        bias = self.bias_ih.float() + self.bias_hh.float()
        h, c = h0, c0
        y = torch.empty(T, *h0.shape, dtype=torch.bfloat16, device=x.device)
        for t in range(T):
            g = xg[t].float() + F.linear(h, self.weight_hh).float() + bias
            i, f, gg, o = g.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
            h = (torch.sigmoid(o) * torch.tanh(c)).to(torch.bfloat16)
            y[t] = h
        return y, c


def get_init_inputs(I, H, **params):
    return [I, H]


def get_inputs(T, B, I, H, **params):
    # a chunk of a longer stream: the state carried in from the previous chunk is not zero
    x = torch.randn(T, B, I).to(torch.bfloat16)
    h0 = (0.5 * torch.tanh(torch.randn(B, H))).to(torch.bfloat16)
    c0 = torch.randn(B, H)
    return [x, h0, c0]
