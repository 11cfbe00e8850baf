"""Mixture-of-experts up-projection with SwiGLU, bf16 in and out.

For every routed (token, k) pair, with e = topk_ids[t, k]:

    y[t * K + k] = silu(x[t] @ W_gate[e]) * (x[t] @ W_up[e])

The gate and up weights of all experts live in one fused parameter `w_gate_up` of shape
(E, H, 2 * I): columns [0, I) are W_gate[e], columns [I, 2 * I) are W_up[e]. The output has one
row per (token, k) pair, in (token, k) order: row t * K + k belongs to token t and its k-th
routed expert. The routing weights are not an input: Mixtral, DeepSeek and Qwen-MoE multiply
them into the expert output after the down projection, so the up projection never reads them.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self, E: int, H: int, I: int):
        super().__init__()
        self.num_experts, self.hidden, self.intermediate = E, H, I
        # The expert weights are parameters, as in a deployed model: they stay put from one call to
        # the next (cold in L2 all the same, since rooftop flushes it before every timed call).
        # Scaled by 1/sqrt(H) so that the gate and up projections have entries of about unit size.
        # Drawn directly in bf16 and scaled in place: no fp32 copy of several GB.
        w = torch.randn(E, H, 2 * I, dtype=torch.bfloat16)
        w.mul_(1.0 / math.sqrt(H))
        self.w_gate_up = nn.Parameter(w, requires_grad=False)

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        T, H = x.shape
        K = topk_ids.shape[1]
        I = self.intermediate
        pair_expert = topk_ids.reshape(-1)  # pair p = t * K + k is routed to expert pair_expert[p]
        y = torch.zeros(T * K, I, dtype=torch.bfloat16, device=x.device)
        for e in range(self.num_experts):
            pairs = (pair_expert == e).nonzero().squeeze(1)
            if pairs.numel() == 0:
                continue  # this expert received no token
            tokens = pairs // K
            h = torch.matmul(x[tokens].float(), self.w_gate_up[e].float())  # fp32 accumulation
            gate, up = h[:, :I], h[:, I:]
            y[pairs] = (F.silu(gate) * up).to(torch.bfloat16)
        return y


def get_init_inputs(E, H, I, **params):
    return [E, H, I]


def get_inputs(T, E, K, H, A, alpha, **params):
    x = torch.randn(T, H, dtype=torch.bfloat16)
    return [x, skewed_routing(T, E, K, A, alpha)]


def skewed_routing(T: int, E: int, K: int, A: int, alpha: float) -> torch.Tensor:
    """(T, K) int64 expert ids: K distinct experts per token, exactly A experts in use.

    A random set of A experts is active (the other E - A receive no token at all). The active
    experts get Zipf popularities rank^-alpha, the ranks assigned at random, so which experts are
    hot changes with the seed; alpha = 0 is uniform, larger alpha is more skewed. Each token picks
    K distinct experts by sampling without replacement in proportion to popularity (the Gumbel
    top-k trick: top-k of log-popularity plus Gumbel noise). Active experts that no token picked
    then each take one slot from the busiest expert, so that exactly A experts receive tokens and
    the bytes formula (which counts the weights of A experts) is exact.
    """
    if not K <= A <= min(E, T * K):
        raise ValueError(f"need K <= A <= min(E, T * K); got T={T}, E={E}, K={K}, A={A}")
    active = torch.randperm(E)[:A]
    rank = torch.randperm(A).to(torch.float32) + 1.0
    log_popularity = torch.full((E,), float("-inf"))
    log_popularity[active] = -alpha * torch.log(rank)
    u = torch.rand(T, E).clamp_min(1e-20)
    gumbel = -torch.log(-torch.log(u))
    topk_ids = torch.topk(log_popularity + gumbel, K, dim=1).indices  # int64, distinct per row

    pair_expert = topk_ids.reshape(-1)
    counts = torch.bincount(pair_expert, minlength=E)
    for e in active[counts[active] == 0].tolist():
        # Fewer than A experts are in use and A <= T * K, so the busiest one has two slots or more.
        busiest = int(torch.argmax(counts))
        slot = int((pair_expert == busiest).nonzero()[-1])
        pair_expert[slot] = e  # e appears nowhere yet, so the token's K experts stay distinct
        counts[busiest] -= 1
        counts[e] += 1
    return pair_expert.reshape(T, K).contiguous()
