"""Broken on purpose: the lazy "symmetric int4" shortcut. It assumes every zero point is 8 (as
GPTQ checkpoints quantized with sym=True, and the kernels written only for them, do) and never
reads `qzeros`, then dequantizes and multiplies in bfloat16. The problem's weights are
asymmetric (min/max per group): their zero points spread over roughly 5..10, so each group whose
zero point is not 8 is shifted by (z - 8) * s and the output is off by far more than the
bfloat16 tolerance. It must be `incorrect`, on the CPU smoke shapes as on a GPU.
"""

import torch
from torch import nn

GROUP_SIZE = 128


class ModelNew(nn.Module):
    def __init__(self, K: int, N: int):
        super().__init__()
        self.K, self.N = K, N
        self.register_buffer("qweight", torch.zeros(N, K // 8, dtype=torch.int32))
        self.register_buffer("scales", torch.zeros(N, K // GROUP_SIZE, dtype=torch.bfloat16))
        self.register_buffer("qzeros", torch.zeros(N, K // GROUP_SIZE, dtype=torch.uint8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, K = self.N, self.K
        shifts = torch.arange(0, 32, 4, dtype=torch.int32, device=x.device)
        q = ((self.qweight[:, :, None] >> shifts) & 0xF).reshape(N, K // GROUP_SIZE, GROUP_SIZE)
        w = ((q - 8).to(torch.bfloat16) * self.scales[:, :, None]).reshape(N, K)  # zero point "is" 8
        y = torch.empty(x.shape[0], N, dtype=torch.bfloat16, device=x.device)
        for m in range(x.shape[0]):  # one row of x at a time: a (N, K) bf16 product, summed over K
            y[m] = (w * x[m]).sum(dim=-1)
        return y
