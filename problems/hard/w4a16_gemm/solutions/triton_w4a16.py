"""W4A16 GEMM in Triton: int4 codes turned into exact bfloat16 integers, the group scale and zero
point applied to the float32 partial sum of each group, and split-K for the small-M shapes.

Load-time repacking (once per device, redone when the buffers change). Within each group of 128
k, word j (0..15) of the repacked codes holds k = 16*i + j in nibble i, so nibble i of a group's
16 words is the contiguous k slice [16i, 16i + 16) and meets a contiguous slice of x. The words
are stored group-major, (K/128, N, 16) int32, so one group's (BLOCK_N, 16) tile is a single
contiguous run; scales and zero points are transposed to (K/128, N) for coalesced loads.

Kernel (y^T tile = W tile @ x^T tile, so the dequantized weight is the MMA's left operand and a
tiny M only pads the MMA's N side, down to 16): for each group, each nibble is OR-ed into the
mantissa of the bfloat16 128.0, giving 128 + q exactly, and fed to tl.dot with the matching x
slice; the group's float32 sum is then corrected and scaled on the accumulator,
    acc += s * (sum_k x_k (128 + q_k) - (128 + z) * sum_k x_k),
which is the exact group contribution up to float32 rounding (no bfloat16 rounding of weights)
at two integer ops a weight. Programs are (N tile x M tile, K split); with several K splits
each writes a float32 partial to a workspace and bumps a per-tile counter, and the last one to
arrive sums the partials in split order (deterministic), writes bfloat16 y and resets the
counter: one launch per forward. The workspace belongs to the module, so one module should not
run forwards on two streams at once.
"""

import torch
import triton
import triton.language as tl
from torch import nn

GROUP_SIZE = 128
WORDS_PER_GROUP = GROUP_SIZE // 8  # 16: one tl.dot K-step of 16 per nibble
_GROUP = tl.constexpr(GROUP_SIZE)  # the same two numbers, as the kernel sees them
_WORDS = tl.constexpr(WORDS_PER_GROUP)


@triton.jit
def _to_bf16(v, EXACT_DOT: tl.constexpr):
    if EXACT_DOT:
        # the CPU interpreter's float32 -> bfloat16 cast truncates: round to nearest even by hand
        bits = v.to(tl.int32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    else:
        return v.to(tl.bfloat16)


@triton.jit
def _w4a16_kernel(x_ptr, qw_ptr, s_ptr, z_ptr, y_ptr, part_ptr, count_ptr,
                  M, N, K, groups_per_split,
                  SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  EXACT_DOT: tl.constexpr):
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tile_m = pid % tiles_m  # M tiles of one N tile are neighbours: they share the weight in L2
    tile_n = pid // tiles_m

    offs_n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_j = tl.arange(0, _WORDS)
    mask_n = offs_n < N
    mask_m = offs_m < M
    groups = K // _GROUP

    # x^T slice (16, BLOCK_M) of nibble 0 of group 0; nibble i of group g is 128*g + 16*i further
    x_tile = x_ptr + offs_m[None, :].to(tl.int64) * K + offs_j[:, None]
    x_mask = mask_m[None, :]
    # repacked words (groups, N, 16): one group's (BLOCK_N, 16) tile is contiguous
    w_tile = qw_ptr + offs_n[:, None] * _WORDS + offs_j[None, :]

    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    g_start = pid_k * groups_per_split
    g_stop = tl.minimum(g_start + groups_per_split, groups)
    g0 = pid_k.to(tl.int64) * groups_per_split  # 64-bit bases, then 32-bit steps of one group
    x_tile += g0 * _GROUP
    w_tile += g0 * N * _WORDS
    s_row = s_ptr + g0 * N + offs_n
    z_row = z_ptr + g0 * N + offs_n
    for _ in range(g_start, g_stop):
        words = tl.load(w_tile, mask=mask_n[:, None], other=0)
        scale = tl.load(s_row, mask=mask_n, other=0.0).to(tl.float32)
        zero = tl.load(z_row, mask=mask_n, other=0).to(tl.float32)
        part = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        x_sum = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for i in tl.static_range(8):
            # 0x4300 is bfloat16 128.0 with an empty 7-bit mantissa: OR-ing a code q in gives 128 + q
            w = (((words >> (4 * i)) & 0xF) | 0x4300).to(tl.int16).to(tl.bfloat16, bitcast=True)
            xt = tl.load(x_tile + 16 * i, mask=x_mask, other=0.0)
            x_sum += tl.sum(xt.to(tl.float32), axis=0)
            if EXACT_DOT:
                part = tl.dot(w.to(tl.float32), xt.to(tl.float32), part)
            else:
                part = tl.dot(w, xt, part)
        acc += scale[:, None] * (part - (zero + 128.0)[:, None] * x_sum[None, :])
        x_tile += _GROUP
        w_tile += N * _WORDS
        s_row += N
        z_row += N

    # y is (M, N) row-major; acc is its transposed tile
    y_offs = offs_m[None, :].to(tl.int64) * N + offs_n[:, None]
    y_mask = mask_n[:, None] & mask_m[None, :]
    if SPLIT == 1:
        tl.store(y_ptr + y_offs, _to_bf16(acc, EXACT_DOT), mask=y_mask)
    else:
        # partials (SPLIT, M, N) float32; the last program of a tile to arrive reduces them
        tl.store(part_ptr + pid_k.to(tl.int64) * M * N + y_offs, acc, mask=y_mask)
        tl.debug_barrier()  # every thread's partial is written before the counter moves
        arrived = tl.atomic_add(count_ptr + pid, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT - 1:
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in tl.static_range(SPLIT):  # in a fixed order: the same sum whoever came last
                acc += tl.load(part_ptr + tl.full((), s, tl.int64) * M * N + y_offs, mask=y_mask,
                               other=0.0, cache_modifier=".cg")
            tl.store(y_ptr + y_offs, _to_bf16(acc, EXACT_DOT), mask=y_mask)
            tl.atomic_xchg(count_ptr + pid, 0)  # ready for the next launch


def _repack(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor):
    """(N, K/8) sequential words -> (K/128, N, 16) words with k = 16*i + j of a group in nibble i
    of word j; scales and zero points -> (K/128, N)."""
    n, words = qweight.shape
    groups = words // WORDS_PER_GROUP
    out = torch.empty(groups, n, WORDS_PER_GROUP, dtype=torch.int32, device=qweight.device)
    shifts = torch.arange(0, 32, 4, dtype=torch.int64, device=qweight.device)
    rows = 2048
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        w = qweight[start:stop].to(torch.int64) & 0xFFFFFFFF
        codes = (w[:, :, None] >> shifts) & 0xF  # (rows, K/8, 8): k = 8*word + nibble
        codes = codes.reshape(stop - start, groups, 8, WORDS_PER_GROUP)  # [.., i, j]: k = 16*i + j
        packed = (codes << shifts[None, None, :, None]).sum(dim=2)  # (rows, groups, 16)
        packed = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)
        out[:, start:stop] = packed.transpose(0, 1)
    return out, scales.t().contiguous(), qzeros.t().contiguous()


def launch_config(M: int, N: int, K: int, device: torch.device):
    """(BLOCK_M, BLOCK_N, K splits, warps, stages). The K split gives about two waves of
    programs when the output has few tiles, each split over at least 4 groups of 128."""
    groups = K // GROUP_SIZE
    if device.type == "cuda":
        block_m = 16 if M <= 16 else 32 if M <= 32 else 64 if M <= 64 else 128
        block_n = 64 if M <= 64 else 128
        warps, stages = (4, 4) if block_m * block_n < 128 * 128 else (8, 3)
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    else:  # Triton interpreter: small tiles, no tensor cores
        block_m, block_n, warps, stages, sms = 16, 32, 4, 1, 4
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
    split = 1
    if tiles < 2 * sms:
        split = min(triton.cdiv(2 * sms, tiles), max(1, groups // 4), 16)
        split = triton.cdiv(groups, triton.cdiv(groups, split))  # no empty splits
    return block_m, block_n, split, warps, stages


class ModelNew(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        if K % GROUP_SIZE:
            raise ValueError(f"K={K} must be a multiple of the group size {GROUP_SIZE}")
        self.K, self.N = K, N
        self.register_buffer("qweight", torch.zeros(N, K // 8, dtype=torch.int32))
        self.register_buffer("scales", torch.zeros(N, K // GROUP_SIZE, dtype=torch.bfloat16))
        self.register_buffer("qzeros", torch.zeros(N, K // GROUP_SIZE, dtype=torch.uint8))
        self._packed = None  # (key, repacked words, scales^T, zeros^T)
        self._scratch = {}  # device -> (float32 partials, int32 tile counters), grown on demand

    def _weights(self):
        bufs = (self.qweight, self.scales, self.qzeros)
        key = tuple((b.device, b.data_ptr(), b._version) for b in bufs)
        if self._packed is None or self._packed[0] != key:
            self._packed = (key, *_repack(*bufs))
        return self._packed[1:]

    def _workspace(self, device, part_numel: int, tiles: int):
        part, count = self._scratch.get(device, (None, None))
        if part is None or part.numel() < part_numel:
            part = torch.empty(part_numel, dtype=torch.float32, device=device)
        if count is None or count.numel() < tiles:
            count = torch.zeros(tiles, dtype=torch.int32, device=device)  # counters reset themselves
        self._scratch[device] = (part, count)
        return part, count

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        M, K = x.shape
        N = self.N
        qw, s, z = self._weights()
        y = torch.empty(M, N, dtype=torch.bfloat16, device=x.device)
        if M == 0 or N == 0:
            return y
        block_m, block_n, split, warps, stages = launch_config(M, N, K, x.device)
        tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
        if split > 1:
            part, count = self._workspace(x.device, split * M * N, tiles)
        else:
            part, count = y, y  # unused
        _w4a16_kernel[(tiles, split)](
            x, qw, s, z, y, part, count, M, N, K, triton.cdiv(K // GROUP_SIZE, split),
            SPLIT=split, BLOCK_M=block_m, BLOCK_N=block_n, EXACT_DOT=not x.is_cuda,
            num_warps=warps, num_stages=stages)
        return y
