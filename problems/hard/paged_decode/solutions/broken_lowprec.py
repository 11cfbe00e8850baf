"""Broken on purpose: the lazy decode. It treats the paged cache as a padded dense cache and skips
the hard parts: it attends over every slot of every block the table names (blocks_per_seq *
block_size keys for every sequence, ignoring seq_lens), and it computes the scores and the softmax
in bfloat16.

The missing length mask is what makes it wrong: the table's entries past a sequence's last page
name pages of other sequences, and even a full-length sequence gets the unused tail of its last
page. It must fail the tolerance on every shape, the CPU smoke shapes included. The bf16 softmax
alone would not be caught: with the lengths honoured, bf16 scores and softmax stay inside the bf16
tolerance on the smoke shapes (checked when this problem was written), so this file is not a test
of precision.
"""

import math

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k_cache, v_cache, block_table, seq_lens):
        batch, num_q_heads, head_dim = q.shape
        _, block_size, num_kv_heads, _ = k_cache.shape
        group = num_q_heads // num_kv_heads
        width = block_table.shape[1] * block_size
        table = block_table.long()
        keys = k_cache[table].reshape(batch, width, num_kv_heads, head_dim)  # bf16, padded
        values = v_cache[table].reshape(batch, width, num_kv_heads, head_dim)
        queries = q.reshape(batch, num_kv_heads, group, head_dim)
        scores = torch.einsum("bkgd,bnkd->bkgn", queries, keys) * (1.0 / math.sqrt(head_dim))  # bf16
        weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.einsum("bkgn,bnkd->bkgd", weights, values)
        return out.reshape(batch, num_q_heads, head_dim).to(q.dtype)
