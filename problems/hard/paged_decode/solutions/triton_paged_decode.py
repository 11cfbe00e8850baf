"""Paged-KV GQA decode attention in Triton: split-KV ("flash-decoding") plus a merge kernel.

Decode is memory-bound: every valid key and value must be read once, so the design is about
reading each one exactly once and keeping all SMs busy.

- `_decode_split`: one program per (sequence, KV head, query-head chunk, split of the sequence).
  All query heads of a GQA group are handled together as the rows of one tile (padded to >= 16
  rows so that `tl.dot` runs on tensor cores), so K and V are read once per group, not per head.
  The program walks its split in tiles of BLOCK_N tokens; each token's page is looked up in the
  block table (a tile may span several pages, or part of one), keys and values are gathered with
  int64 offsets, tokens at or past the sequence's length are masked out (loaded as zero, scored
  -inf), and an online softmax in float32 (base 2, scale folded into the exponent) accumulates
  the weighted values. Each split writes its normalised partial output and log-sum-exp (fp32).
- `_merge_splits`: one program per (sequence, query head) combines the splits that hold tokens
  of that sequence by their log-sum-exp and writes bf16. With a single split the first kernel
  writes the bf16 output itself and no merge runs.

The number of splits is picked on the host from the block table's width (which bounds every
length), the batch and the number of KV-head groups, so no device-to-host sync is needed; splits
that start past a sequence's length return at once, and the merge ignores them.
"""

import torch
import triton
import triton.language as tl
from torch import nn

LOG2E = 1.4426950408889634
# GPU launch plan: programs aimed for per SM, fewest tokens per split, pipeline depth, warps.
PROGRAMS_PER_SM = 16
MIN_SPLIT_TOKENS = 512
MAX_SPLITS = 64  # more makes the merge's serial walk over the splits cost more than it balances
NUM_STAGES = 2
NUM_WARPS = 4
BLOCK_N = 64  # tokens per tile (halved for head dims above 128)


@triton.jit
def _decode_split(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, part_o_ptr, part_lse_ptr, out_ptr,
                  table_width, split_len, num_splits, qk_scale,
                  NUM_KV: tl.constexpr, GROUP: tl.constexpr, HEAD_CHUNKS: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, DIM_PAD: tl.constexpr,
                  HEADS: tl.constexpr, BLOCK_N: tl.constexpr,
                  SINGLE_SPLIT: tl.constexpr, EXACT_DOT: tl.constexpr):
    # Layouts (all contiguous): q and out (B, Hq, D); caches (blocks, BLOCK_SIZE, NUM_KV, D);
    # table (B, table_width); partials (B, Hq, num_splits, D) and (B, Hq, num_splits).
    pid = tl.program_id(0)  # (sequence, KV head, chunk of the group's query heads)
    split = tl.program_id(1)
    chunk = pid % HEAD_CHUNKS
    kv_head = (pid // HEAD_CHUNKS) % NUM_KV
    seq = pid // (HEAD_CHUNKS * NUM_KV)
    stride_tok = NUM_KV * HEAD_DIM
    stride_blk = BLOCK_SIZE * stride_tok

    seq_len = tl.load(lens_ptr + seq)
    start = split * split_len
    if start < seq_len:  # splits past the sequence's end do nothing; the merge skips them
        end = tl.minimum(start + split_len, seq_len)

        g = chunk * HEADS + tl.arange(0, HEADS)  # rows: query heads of the group (padded)
        row_ok = g < GROUP
        q_head = kv_head * GROUP + g
        dims = tl.arange(0, DIM_PAD)
        dim_ok = dims < HEAD_DIM
        seq64 = seq.to(tl.int64)
        row = (seq64 * (NUM_KV * GROUP) + q_head) * HEAD_DIM  # offsets of the rows in q and out
        q = tl.load(q_ptr + row[:, None] + dims[None, :], mask=row_ok[:, None] & dim_ok[None, :],
                    other=0.0)
        if EXACT_DOT:
            q = q.to(tl.float32)

        table_row = table_ptr + seq64 * table_width
        k_head = k_ptr + kv_head * HEAD_DIM
        v_head = v_ptr + kv_head * HEAD_DIM
        offs_n = tl.arange(0, BLOCK_N)

        run_max = tl.full([HEADS], float("-inf"), tl.float32)
        run_sum = tl.zeros([HEADS], tl.float32)
        acc = tl.zeros([HEADS, DIM_PAD], tl.float32)
        for tile in range(start, end, BLOCK_N):
            tok = tile + offs_n
            valid = tok < end
            page = tl.load(table_row + tok // BLOCK_SIZE, mask=valid, other=0).to(tl.int64)
            kv_row = page * stride_blk + (tok % BLOCK_SIZE) * stride_tok
            kv_mask = valid[:, None] & dim_ok[None, :]
            k = tl.load(k_head + kv_row[:, None] + dims[None, :], mask=kv_mask, other=0.0)
            v = tl.load(v_head + kv_row[:, None] + dims[None, :], mask=kv_mask, other=0.0)
            if EXACT_DOT:
                k = k.to(tl.float32)
                v = v.to(tl.float32)

            scores = tl.dot(q, tl.trans(k)) * qk_scale  # (HEADS, BLOCK_N), log2 units
            scores = tl.where(valid[None, :], scores, float("-inf"))
            new_max = tl.maximum(run_max, tl.max(scores, axis=1))  # finite: tile has a valid token
            alpha = tl.exp2(run_max - new_max)
            p = tl.exp2(scores - new_max[:, None])
            run_sum = run_sum * alpha + tl.sum(p, axis=1)
            if EXACT_DOT:
                acc = acc * alpha[:, None] + tl.dot(p, v)
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            run_max = new_max

        o = acc / run_sum[:, None]
        out_mask = row_ok[:, None] & dim_ok[None, :]
        if SINGLE_SPLIT:
            tl.store(out_ptr + row[:, None] + dims[None, :], o.to(out_ptr.dtype.element_ty),
                     mask=out_mask)
        else:
            part = (seq64 * (NUM_KV * GROUP) + q_head) * num_splits + split
            tl.store(part_o_ptr + part[:, None] * HEAD_DIM + dims[None, :], o, mask=out_mask)
            tl.store(part_lse_ptr + part, run_max + tl.log2(run_sum), mask=row_ok)


@triton.jit
def _merge_splits(part_o_ptr, part_lse_ptr, lens_ptr, out_ptr, split_len, num_splits,
                  NUM_Q: tl.constexpr, HEAD_DIM: tl.constexpr, DIM_PAD: tl.constexpr,
                  SPLIT_BLOCK: tl.constexpr):
    pid = tl.program_id(0)  # (sequence, query head)
    seq = pid // NUM_Q
    seq_len = tl.load(lens_ptr + seq)
    used = tl.cdiv(seq_len, split_len)  # splits that hold tokens of this sequence (>= 1)

    base = pid.to(tl.int64) * num_splits  # first partial of this (sequence, head)
    dims = tl.arange(0, DIM_PAD)
    dim_ok = dims < HEAD_DIM
    offs_s = tl.arange(0, SPLIT_BLOCK)
    run_max = float("-inf")
    weight = 0.0
    acc = tl.zeros([DIM_PAD], tl.float32)
    for first in range(0, used, SPLIT_BLOCK):
        splits = first + offs_s
        ok = splits < used
        rows = base + splits
        lse = tl.load(part_lse_ptr + rows, mask=ok, other=float("-inf"))
        o = tl.load(part_o_ptr + rows[:, None] * HEAD_DIM + dims[None, :],
                    mask=ok[:, None] & dim_ok[None, :], other=0.0)
        new_max = tl.maximum(run_max, tl.max(lse, axis=0))  # finite: the chunk has a used split
        alpha = tl.exp2(run_max - new_max)
        w = tl.exp2(lse - new_max)
        weight = weight * alpha + tl.sum(w, axis=0)
        acc = acc * alpha + tl.sum(w[:, None] * o, axis=0)
        run_max = new_max

    tl.store(out_ptr + pid.to(tl.int64) * HEAD_DIM + dims, (acc / weight).to(out_ptr.dtype.element_ty),
             mask=dim_ok)


_SM_COUNT = {}


def _sm_count(device):
    if device not in _SM_COUNT:
        _SM_COUNT[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT[device]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k_cache, v_cache, block_table, seq_lens):
        batch, num_q_heads, head_dim = q.shape
        _, block_size, num_kv_heads, _ = k_cache.shape
        group = num_q_heads // num_kv_heads
        # The layouts the kernels assume; each is a no-op on the contiguous inputs of the problem.
        q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
        block_table, seq_lens = block_table.contiguous(), seq_lens.contiguous()
        out = torch.empty((batch, num_q_heads, head_dim), dtype=q.dtype, device=q.device)
        if batch == 0:
            return out
        on_gpu = q.is_cuda

        heads = max(16, min(triton.next_power_of_2(group), 64))  # rows of the dot: >= 16
        head_chunks = triton.cdiv(group, heads)
        dim_pad = triton.next_power_of_2(head_dim)
        if on_gpu:
            block_n = BLOCK_N if dim_pad <= 128 else BLOCK_N // 2
            target_programs, min_split = PROGRAMS_PER_SM * _sm_count(q.device), MIN_SPLIT_TOKENS
        else:  # the interpreter: small tiles, a few splits so the merge is exercised
            block_n, target_programs, min_split = 16, 64, 16

        # Every length is <= the table's width, so size the splits from it (no host sync).
        table_width = block_table.shape[1]
        max_tokens = table_width * block_size
        programs = batch * num_kv_heads * head_chunks
        splits = max(1, min(triton.cdiv(target_programs, programs), triton.cdiv(max_tokens, min_split),
                             MAX_SPLITS))
        split_len = triton.cdiv(triton.cdiv(max_tokens, splits), block_n) * block_n
        splits = triton.cdiv(max_tokens, split_len)

        if splits > 1:
            part_o = torch.empty((batch, num_q_heads, splits, head_dim), dtype=torch.float32,
                                 device=q.device)
            part_lse = torch.empty((batch, num_q_heads, splits), dtype=torch.float32, device=q.device)
        else:
            part_o = part_lse = out  # not touched
        _decode_split[(programs, splits)](
            q, k_cache, v_cache, block_table, seq_lens, part_o, part_lse, out,
            table_width, split_len, splits, LOG2E / head_dim ** 0.5,
            NUM_KV=num_kv_heads, GROUP=group, HEAD_CHUNKS=head_chunks, BLOCK_SIZE=block_size,
            HEAD_DIM=head_dim, DIM_PAD=dim_pad, HEADS=heads, BLOCK_N=block_n,
            SINGLE_SPLIT=splits == 1, EXACT_DOT=not on_gpu,
            num_warps=NUM_WARPS if on_gpu else 4, num_stages=NUM_STAGES if on_gpu else 1)
        if splits > 1:
            # Many small programs (one per sequence and head), each as wide as the splits it
            # merges: the merge is latency-bound, so few warps per program and one wave.
            split_block = min(triton.next_power_of_2(splits), 32 if on_gpu else 4)
            _merge_splits[(batch * num_q_heads,)](
                part_o, part_lse, seq_lens, out, split_len, splits,
                NUM_Q=num_q_heads, HEAD_DIM=head_dim, DIM_PAD=dim_pad, SPLIT_BLOCK=split_block,
                num_warps=max(1, min(4, split_block * dim_pad // 1024)))
        return out
