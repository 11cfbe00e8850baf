"""Language-model head + cross-entropy per token: logits = h @ W^T, then -log softmax(logits)[target].

    logits = hidden @ W^T                                  (T, V) in bf16
    loss[t] = logsumexp(logits[t]) - logits[t, target[t]]  in fp32, 0 where target[t] == -100

Written as a training loop writes it (Hugging Face upcasts the logits to fp32 before the loss):
the (T, V) logits are materialised in bf16, copied to fp32, and log-softmaxed. A fused kernel
streams vocabulary tiles of the GEMM through an online logsumexp and never writes the logits.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

IGNORE_INDEX = -100


class Model(nn.Module):
    def __init__(self, hidden_size: int, vocab_size: int):
        super().__init__()
        # Untied LM head weight, drawn in bf16 with entries ~ N(0, 4 / hidden_size): logits of
        # standard deviation about 2, so the softmax is peaked the way a trained model's is.
        w = torch.randn(vocab_size, hidden_size, dtype=torch.bfloat16)
        w.mul_(2.0 / math.sqrt(hidden_size))
        self.weight = nn.Parameter(w, requires_grad=False)

    def forward(self, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = torch.matmul(hidden, self.weight.t())  # (T, V) bf16
        return F.cross_entropy(logits.float(), target, ignore_index=IGNORE_INDEX, reduction="none")


def get_init_inputs(H, V, **params):
    return [H, V]


def get_inputs(T, H, V, **params):
    hidden = torch.randn(T, H, dtype=torch.bfloat16)  # the final norm's output
    target = torch.randint(0, V, (T,))
    # About one token in ten is padding (ignored: loss 0), as in a packed or padded batch.
    target = torch.where(torch.rand(T) < 0.1, torch.full_like(target, IGNORE_INDEX), target)
    return [hidden, target]
