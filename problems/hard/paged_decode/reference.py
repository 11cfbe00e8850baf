"""Decode attention over a paged KV cache with grouped-query attention (GQA), bf16.

One new token per sequence attends to all the keys and values that sequence has cached. The cache
is paged the way vLLM stores it: each layer's keys live in `k_cache` of shape
(num_blocks, block_size, Hkv, D) ("NHD" inside a page: token, then KV head, then channel), the
values likewise in `v_cache`, and `block_table[b, j]` names the physical block that holds tokens
j * block_size ... (j + 1) * block_size - 1 of sequence b. Only the first `seq_lens[b]` tokens of a
sequence are valid; the table's entries past its last block point at blocks that belong to other
sequences.

For every sequence b and query head h (which reads KV head h // (Hq // Hkv)):

    out[b, h] = softmax(q[b, h] . K_b[:, h_kv]^T * scale) @ V_b[:, h_kv],   scale = 1 / sqrt(D)

computed in float32 and rounded to bfloat16 once at the end.
"""

import math

import torch
from torch import nn


class Model(nn.Module):
    """No weights: the cache and the queries are activations, produced by earlier layers and steps."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                block_table: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
        batch, num_q_heads, head_dim = q.shape
        _, block_size, num_kv_heads, _ = k_cache.shape
        group = num_q_heads // num_kv_heads  # query heads that share one KV head
        scale = 1.0 / math.sqrt(head_dim)
        out = torch.empty_like(q)
        for b in range(batch):
            length = int(seq_lens[b])
            pages = block_table[b, : (length + block_size - 1) // block_size].long()
            # the sequence's tokens in order: (length, Hkv, D), float32
            keys = k_cache[pages].reshape(-1, num_kv_heads, head_dim)[:length].float()
            values = v_cache[pages].reshape(-1, num_kv_heads, head_dim)[:length].float()
            query = q[b].float().reshape(num_kv_heads, group, head_dim)  # head h -> (h // group, h % group)
            scores = torch.einsum("kgd,nkd->kgn", query, keys) * scale
            probs = torch.softmax(scores, dim=-1)
            attended = torch.einsum("kgn,nkd->kgd", probs, values)
            out[b] = attended.reshape(num_q_heads, head_dim).to(q.dtype)
        return out


def get_init_inputs(**params):
    return []


def get_inputs(B, Hq, Hkv, D, max_len, min_len, block_size, **params):
    """A decode step of B sequences with different lengths, their pages scattered over the cache.

    Lengths are uniform integers in [min_len, max_len]; when B >= 2, one sequence (at a random
    position) is set to max_len and another to min_len, so every batch has a full-length and a short
    sequence. The expected total length is B * (min_len + max_len) / 2 either way, which is what the
    flops and bytes formulas use.

    The cache holds B * ceil(max_len / block_size) blocks and the block table is a random
    permutation of all of them: a sequence's pages are scattered, and the entries past its last
    page name pages of other sequences (filled with other data), so reading them changes the answer.
    q, keys and values are standard normal: attention logits have a standard deviation of about 1.
    """
    blocks_per_seq = (max_len + block_size - 1) // block_size
    num_blocks = B * blocks_per_seq
    q = torch.randn(B, Hq, D).to(torch.bfloat16)
    k_cache = torch.randn(num_blocks, block_size, Hkv, D).to(torch.bfloat16)
    v_cache = torch.randn(num_blocks, block_size, Hkv, D).to(torch.bfloat16)
    block_table = torch.randperm(num_blocks).to(torch.int32).reshape(B, blocks_per_seq)
    seq_lens = torch.randint(min_len, max_len + 1, (B,))
    if B >= 2:
        full, short = torch.randperm(B)[:2].tolist()
        seq_lens[full] = max_len
        seq_lens[short] = min_len
    return [q, k_cache, v_cache, block_table, seq_lens.to(torch.int32)]
