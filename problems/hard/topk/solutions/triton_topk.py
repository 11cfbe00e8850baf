"""Row top-k in Triton: packed 64-bit keys, sorted K-wide lists, kept by row maxima or bitonic merges.

Each element becomes one int64 key: the float's bits mapped to an order-preserving int32 in the
high half, and 2^32 - 1 - column in the low half. Keys are then all distinct and ordered by value
first, then by smaller column, so a selection of keys is a selection of (value, index) pairs with
ties resolved once and for all; the values and indices are unpacked only when written.

A program owns ROWS rows and a slice of their columns, and keeps per row a descending list of the
K best keys so far (K = k rounded up to a power of two). For K <= 8 the list is refilled from each
tile by K rounds of a row max, each round taking out the key it found. For larger K each tile of
R*K columns is cut into R lists of K, each sorted, and pairs of sorted lists are merged by the rule
of bitonic top-k: the elementwise maximum of a descending list and an ascending one holds exactly
the K largest of the two as a bitonic sequence, and log K compare-and-swap steps order it. The
network is written out with reshape, split and join, one code path for the GPU and the CPU
interpreter (where tl.sort's reductions run element by element in Python). A tile whose largest
key does not beat the smallest kept key is skipped after a single max. Rows too long for one
program are sliced; each slice writes its K keys, and the same kernel then selects the final k
from the slices' candidates.

Masked lanes read -inf at a column past the row's end, which ranks below every real element
(a real -inf included), so they can never be selected while k <= N.
"""

import torch
import triton
import triton.language as tl
from torch import nn

_LOW = tl.constexpr(4294967295)  # 2^32 - 1


@triton.jit
def _pack(x, cols):
    bits = x.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # negative floats: reverse their order
    return (ordered.to(tl.int64) << 32) + (_LOW - cols.to(tl.int64))


@triton.jit
def _compare_swap(x, ROWS: tl.constexpr, M: tl.constexpr, j: tl.constexpr, s: tl.constexpr,
                  ALL_DESC: tl.constexpr, ASC_FIRST: tl.constexpr):
    """One step of a bitonic network on each row of x (ROWS, M): order the pairs of positions that
    differ in bit j, descending in even blocks of 2^s positions and ascending in odd ones (the
    other way round with ASC_FIRST; descending everywhere with ALL_DESC)."""
    OUT: tl.constexpr = M >> (j + 1)
    IN: tl.constexpr = 1 << j
    a, b = tl.split(tl.permute(tl.reshape(x, [ROWS, OUT, 2, IN]), (0, 1, 3, 2)))
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    if ALL_DESC:
        first, second = hi, lo
    else:
        desc = (((tl.arange(0, OUT) >> (s - j - 1)) & 1) == (1 if ASC_FIRST else 0))[None, :, None]
        first = tl.where(desc, hi, lo)
        second = tl.where(desc, lo, hi)
    return tl.reshape(tl.permute(tl.join(first, second), (0, 1, 3, 2)), [ROWS, M])


@triton.jit
def _tile_top(keys, ROWS: tl.constexpr, R: tl.constexpr, K: tl.constexpr,
              LOG_R: tl.constexpr, LOG_K: tl.constexpr):
    """The K largest keys of each row of keys (ROWS, R*K), in ascending order.

    Sort the R lists of K, alternately descending and ascending; then, R/2 times over, the
    elementwise max of a descending list and the ascending one next to it holds their K largest
    as a bitonic sequence, and log K steps sort it (alternating again, ascending at the end)."""
    x = keys
    for stage in tl.static_range(1, LOG_K + 1):
        for step in tl.static_range(stage):
            x = _compare_swap(x, ROWS, R * K, stage - 1 - step, stage, False, LOG_R == 0)
    for level in tl.static_range(LOG_R):
        # (R >> level) // 2 pairs of lists; spelled out each time, a constexpr cannot be rebound
        a, b = tl.split(tl.permute(tl.reshape(x, [ROWS, (R >> level) // 2, 2, K]), (0, 1, 3, 2)))
        x = tl.reshape(tl.maximum(a, b), [ROWS, (R >> level) // 2 * K])
        for step in tl.static_range(LOG_K):
            x = _compare_swap(x, ROWS, (R >> level) // 2 * K, LOG_K - 1 - step, LOG_K, False, level == LOG_R - 1)
    return x


@triton.jit
def _top_by_max(best, keys, ROWS: tl.constexpr, K: tl.constexpr):
    """The K largest of a descending list best (ROWS, K) and a tile of keys, descending: K rounds
    of a row max, each taking out the one key it found (keys are distinct)."""
    slots = tl.arange(0, K)[None, :]
    gone = tl.full([ROWS, 1], -9223372036854775807 - 1, tl.int64)  # below every key
    out = best
    for slot in tl.static_range(K):
        top = tl.maximum(tl.max(keys, 1), tl.max(best, 1))[:, None]
        out = tl.where(slots == slot, top, out)
        keys = tl.where(keys == top, gone, keys)
        best = tl.where(best == top, gone, best)
    return out


@triton.jit
def _select(src_ptr, keys_ptr, values_ptr, indices_ptr, n_rows, n_cols, k, chunk,
            KEYS_IN: tl.constexpr, FINAL: tl.constexpr,
            ROWS: tl.constexpr, R: tl.constexpr, K: tl.constexpr, LOG_R: tl.constexpr,
            LOG_K: tl.constexpr, BY_MAX: tl.constexpr):
    BLOCK: tl.constexpr = R * K
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    split = tl.program_id(1)
    row_ok = rows < n_rows
    row_base = rows.to(tl.int64)[:, None] * n_cols
    offsets = tl.arange(0, BLOCK)
    start = split * chunk
    stop = tl.minimum(start + chunk, n_cols)

    # the initial list ranks below any element: -inf at column 2^32 - 1
    floor = _pack(tl.full([ROWS, K], float("-inf"), tl.float32), tl.full([ROWS, K], _LOW, tl.int64))
    best = floor
    for base in range(start, stop, BLOCK):
        cols = base + offsets[None, :]
        mask = row_ok[:, None] & (cols < stop)
        if KEYS_IN:
            keys = tl.load(src_ptr + row_base + cols, mask=mask, other=0)
            keys = tl.where(mask, keys, _pack(tl.full([ROWS, BLOCK], float("-inf"), tl.float32),
                                              tl.full([ROWS, BLOCK], _LOW, tl.int64)))
        else:
            x = tl.load(src_ptr + row_base + cols, mask=mask, other=float("-inf"))
            keys = _pack(x, cols)
        if tl.max(tl.max(keys, 1), 0) > tl.min(tl.min(best, 1), 0):
            if BY_MAX:
                best = _top_by_max(best, keys, ROWS, K)
            else:
                merged = tl.maximum(best, _tile_top(keys, ROWS, R, K, LOG_R, LOG_K))  # bitonic
                for step in tl.static_range(LOG_K):
                    merged = _compare_swap(merged, ROWS, K, LOG_K - 1 - step, LOG_K, True, False)
                best = merged

    slots = tl.arange(0, K)[None, :]
    if FINAL:
        high = (best >> 32).to(tl.int32)
        values = (high ^ ((high >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)
        indices = _LOW - (best & _LOW)
        out = rows.to(tl.int64)[:, None] * k + slots
        keep = row_ok[:, None] & (slots < k)
        tl.store(values_ptr + out, values, mask=keep)
        tl.store(indices_ptr + out, indices, mask=keep)
    else:
        splits = tl.num_programs(1)
        out = (rows.to(tl.int64)[:, None] * splits + split) * K + slots
        tl.store(keys_ptr + out, best, mask=row_ok[:, None])


# Small lists are filled by K rounds of a row max; larger ones by the bitonic merge.
BY_MAX_UP_TO = 8


def _plan(n_cols: int, K: int, on_gpu: bool) -> tuple[int, int]:
    """(ROWS, R): a tile of ROWS x R*K keys, about 1024 of them on a GPU."""
    budget = 1024 if on_gpu else 256
    width = max(triton.next_power_of_2(n_cols), K)  # a row's columns, padded
    block = max(K, min(width, budget))
    rows = max(1, min(budget // block, 64))
    return rows, block // K


class ModelNew(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = int(k)

    def _launch(self, src, n_rows, n_cols, keys_in, splits, keys=None, values=None, indices=None):
        K = max(2, triton.next_power_of_2(self.k))
        rows, r = _plan(n_cols, K, src.is_cuda)
        block = r * K
        chunk = triton.cdiv(triton.cdiv(n_cols, splits), block) * block
        splits = triton.cdiv(n_cols, chunk)
        final = values is not None
        if not final:
            keys = torch.empty((n_rows, splits * K), dtype=torch.int64, device=src.device)
        dummy = keys if keys is not None else values
        grid = (triton.cdiv(n_rows, rows), splits)
        _select[grid](src, keys if keys is not None else dummy, values if final else dummy,
                      indices if final else dummy, n_rows, n_cols, self.k, chunk,
                      KEYS_IN=keys_in, FINAL=final, ROWS=rows, R=r, K=K, LOG_R=r.bit_length() - 1,
                      LOG_K=K.bit_length() - 1, BY_MAX=K <= BY_MAX_UP_TO,
                      num_warps=4)
        return keys, splits

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        k = self.k
        values = torch.empty((n_rows, k), dtype=x.dtype, device=x.device)
        indices = torch.empty((n_rows, k), dtype=torch.int64, device=x.device)
        if n_rows == 0 or k == 0:
            return values, indices
        K = max(2, triton.next_power_of_2(k))
        rows, r = _plan(n_cols, K, x.is_cuda)
        programs = triton.cdiv(n_rows, rows)
        target = 4 * torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 16
        # slice the rows when there are too few programs, never below 4 tiles a slice
        splits = max(1, min(triton.cdiv(target, programs), triton.cdiv(n_cols, 4 * r * K)))
        if splits == 1:
            self._launch(x, n_rows, n_cols, False, 1, values=values, indices=indices)
            return values, indices
        keys, splits = self._launch(x, n_rows, n_cols, False, splits)
        self._launch(keys, n_rows, splits * K, True, 1, keys=keys, values=values, indices=indices)
        return values, indices
