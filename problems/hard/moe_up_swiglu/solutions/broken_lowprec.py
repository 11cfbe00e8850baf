"""Broken on purpose: the fp8 shortcut. Activations and expert weights are quantized to float8
e4m3 with one scale per tensor (per expert for the weights), as one would to feed Hopper's fp8 tensor cores, and everything
after that is exact (fp32 products and sums, fp32 SwiGLU). Three mantissa bits put about 5%
normwise error on y, far outside the tolerance, so this must be judged incorrect.

The products are broadcast multiplies summed over H in chunks (no library GEMM, which the
problem forbids); slow, but it only has to get far enough to be found wrong.
"""

import torch
import torch.nn.functional as F
from torch import nn

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def _fp8_roundtrip(t: torch.Tensor) -> torch.Tensor:
    """t rounded to float8 e4m3 with a per-tensor scale, returned in fp32."""
    t = t.float()
    scale = t.abs().amax().clamp_min(1e-12) / FP8_MAX
    return (t / scale).to(torch.float8_e4m3fn).float() * scale


def _product(a: torch.Tensor, b: torch.Tensor, budget: int = 1 << 24) -> torch.Tensor:
    """a (n, H) @ b (H, N) in fp32 by broadcasting, summing over chunks of H."""
    n, H = a.shape
    N = b.shape[1]
    out = torch.zeros(n, N, dtype=torch.float32, device=a.device)
    step = max(1, budget // max(1, n * N))
    for h0 in range(0, H, step):
        out += (a[:, h0:h0 + step, None] * b[None, h0:h0 + step, :]).sum(dim=1)
    return out


class ModelNew(nn.Module):
    def __init__(self, E: int, H: int, I: int):
        super().__init__()
        self.num_experts, self.intermediate = E, I
        self.w_gate_up = nn.Parameter(torch.empty(E, H, 2 * I, dtype=torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        T, _ = x.shape
        K = topk_ids.shape[1]
        I = self.intermediate
        xq = _fp8_roundtrip(x)
        pair_expert = topk_ids.reshape(-1)
        y = torch.zeros(T * K, I, dtype=torch.bfloat16, device=x.device)
        for e in range(self.num_experts):
            pairs = (pair_expert == e).nonzero().squeeze(1)
            if pairs.numel() == 0:
                continue
            h = _product(xq[pairs // K], _fp8_roundtrip(self.w_gate_up[e]))
            y[pairs] = (F.silu(h[:, :I]) * h[:, I:]).to(torch.bfloat16)
        return y
