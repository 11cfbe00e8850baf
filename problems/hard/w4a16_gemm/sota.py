"""SOTA line: PyTorch's int4 weight-only GEMM, `torch._weight_int4pack_mm` (the "tinygemm" CUDA
kernel used by torchao's int4 weight-only quantization and by gpt-fast), after repacking the
problem's weights once with `torch._convert_weight_to_int4pack`.

Installed signatures (torch.ops.aten schemas):
    _convert_weight_to_int4pack(Tensor self, int innerKTiles) -> Tensor
    _weight_int4pack_mm(Tensor self, Tensor mat2, int qGroupSize, Tensor qScaleAndZeros) -> Tensor

What the CUDA kernel expects (aten/src/ATen/native/cuda/int4mm.cu and the meta registrations):
- the weight as uint8 (N, K / 2), two codes a byte, the EVEN k in the HIGH nibble and the odd k
  in the low one (the convention of torch's own tests); `_convert_weight_to_int4pack` turns it
  into the tensor-core tile layout (N / 8, K / (innerKTiles * 16), 32, innerKTiles / 2) int32.
  innerKTiles is 2, 4 or 8 and K must be a multiple of innerKTiles * 16: with K a multiple of
  128 here, 8 (16-byte loads, as torchao and gpt-fast use) always fits;
- x bfloat16, contiguous, 2-D; qGroupSize in {32, 64, 128, 256}; the output has N rounded up to
  a multiple of 8 (the kernel's n-tile), so N is padded with zero rows and the output sliced;
- qScaleAndZeros bfloat16 (K / qGroupSize, N, 2) = (scale, zero) per group and column, and the
  kernel dequantizes as  w = (q - 8) * scale + zero  (one bf16 fma on codes shifted to [-8, 7]).

The problem's weights are AWQ/GPTQ style, w = (q - z) * s with an integer zero point z. Since
(q - z) * s = (q - 8) * s + (8 - z) * s, the tinygemm pair is (s, (8 - z) * s). s is the stored
bf16 scale (no rounding); (8 - z) * s is exact in fp32 and rounded once to bf16 (relative error
at most 2**-9 of an offset of at most 8 s), inside the bfloat16 tolerance. The same conversion
is checked on a CPU against the reference with the CPU variant of the op
(`_weight_int4pack_mm_for_cpu`, same qScaleAndZeros format and dequantization formula); the
uint8 nibble order of the CUDA packing cannot be exercised without a GPU.

Chosen for every shape: tinygemm covers them all once N is padded to a multiple of 8 (there is
no fallback to dequantize + bf16 matmul). It is the int4 path PyTorch ships; it is strongest at
small M (memory-bound decode) and known to lose ground at M in the hundreds, where its
16x8x16 mma tiles with no shared-memory staging stop keeping up.
"""

import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("rooftop_w4a16_gemm_reference_for_sota",
                                               Path(__file__).with_name("reference.py"))
_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_reference)

GROUP_SIZE = _reference.GROUP_SIZE
INNER_K_TILES = 8


def available():
    if not torch.cuda.is_available():
        return ("needs a CUDA GPU: torch._weight_int4pack_mm's tinygemm kernel runs on CUDA only "
                "(its CPU variant, _weight_int4pack_mm_for_cpu, is a different kernel, not this SOTA line)")
    if torch.cuda.get_device_capability() < (8, 0):
        return "torch._weight_int4pack_mm needs an sm_80 or newer GPU (bf16 mma.sync m16n8k16)"
    for op in ("_weight_int4pack_mm", "_convert_weight_to_int4pack"):
        if not hasattr(torch.ops.aten, op):
            return f"this torch ({torch.__version__}) has no aten::{op}"
    return True


def unpacked_codes(qweight: torch.Tensor) -> torch.Tensor:
    """The problem's int32 (N, K / 8) words -> int32 codes (N, K), k = 8*j + i from bits [4i, 4i+4)."""
    shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=qweight.device)
    return ((qweight[:, :, None] >> shifts) & 0xF).reshape(qweight.shape[0], -1)


def padded_rows(n: int) -> int:
    return (n + 7) // 8 * 8


def tinygemm_uint8(codes: torch.Tensor) -> torch.Tensor:
    """int32 codes (N, K) -> uint8 (N8, K / 2) for _convert_weight_to_int4pack: even k in the high
    nibble, odd k in the low nibble; rows N..N8-1 are zero padding."""
    n, k = codes.shape
    out = torch.zeros(padded_rows(n), k // 2, dtype=torch.uint8, device=codes.device)
    out[:n] = ((codes[:, 0::2] << 4) | codes[:, 1::2]).to(torch.uint8)
    return out


def scales_and_zeros(scales: torch.Tensor, qzeros: torch.Tensor) -> torch.Tensor:
    """bf16 scales and integer zero points, both (N, G) -> bf16 (G, N8, 2) of (s, (8 - z) * s)."""
    n, groups = scales.shape
    s = scales.float()
    offset = (8.0 - qzeros.float()) * s  # exact in fp32: an 8-bit mantissa times an integer <= 8
    pair = torch.zeros(groups, padded_rows(n), 2, dtype=torch.float32, device=scales.device)
    pair[:, :n, 0] = s.t()
    pair[:, :n, 1] = offset.t()
    return pair.to(torch.bfloat16).contiguous()


class Model(_reference.Model):
    """The reference module (same constructor, same buffers, so rooftop copies its weights),
    with a forward through tinygemm on a copy of the weights repacked once per device."""

    def __init__(self, K: int, N: int):
        super().__init__(K, N)
        self._packed = None  # (device, packed weight, scales_and_zeros)

    def _load_from_state_dict(self, *args, **kwargs):
        self._packed = None
        super()._load_from_state_dict(*args, **kwargs)

    def _repack(self):
        device = self.qweight.device
        if self._packed is None or self._packed[0] != device:
            codes = unpacked_codes(self.qweight)
            weight = torch.ops.aten._convert_weight_to_int4pack(tinygemm_uint8(codes), INNER_K_TILES)
            self._packed = (device, weight, scales_and_zeros(self.scales, self.qzeros))
        return self._packed[1], self._packed[2]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, sz = self._repack()
        y = torch.ops.aten._weight_int4pack_mm(x.contiguous(), weight, GROUP_SIZE, sz)
        return y if y.shape[1] == self.N else y[:, :self.N].contiguous()
