"""Starter: depthwise KS x KS convolution (bf16, NCHW, 'same' padding) in CUDA C++ (load_inline),
correct but slow.

One thread per output element: it decodes (n, c, h, w) from its index, then loops over the
KS x KS window with a bounds check per tap, reading every input and weight from global memory as
a single bf16 and accumulating in float32. Each input element is fetched by KS^2 threads (from L1
or L2 at best); there is no shared-memory tile, no register reuse between neighbouring outputs
and no vector load.
"""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;

__global__ void depthwise_conv_naive_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                            const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ y,
                                            int64_t total, int C, int H, int W, int KS) {
    const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    if (i >= total) return;
    const int ow = (int)(i % W);
    const int oh = (int)((i / W) % H);
    const int64_t plane = i / ((int64_t)H * W);  // n * C + c
    const int c = (int)(plane % C);
    const int pad = KS / 2;
    const __nv_bfloat16* xp = x + plane * H * W;
    const __nv_bfloat16* wc = w + (int64_t)c * KS * KS;
    float acc = __bfloat162float(bias[c]);
    for (int kh = 0; kh < KS; ++kh) {
        const int ih = oh + kh - pad;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < KS; ++kw) {
            const int iw = ow + kw - pad;
            if (iw < 0 || iw >= W) continue;
            acc = fmaf(__bfloat162float(xp[(int64_t)ih * W + iw]), __bfloat162float(wc[kh * KS + kw]), acc);
        }
    }
    y[i] = __float2bfloat16(acc);
}

}  // namespace

void depthwise_conv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor y, int64_t stream) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && bias.is_cuda() && y.is_cuda(), "tensors must be on the GPU");
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && w.scalar_type() == torch::kBFloat16 &&
                bias.scalar_type() == torch::kBFloat16 && y.scalar_type() == torch::kBFloat16,
                "tensors must be bfloat16");
    TORCH_CHECK(x.dim() == 4 && x.is_contiguous() && w.is_contiguous() && bias.is_contiguous() && y.is_contiguous(),
                "x must be 4-D NCHW; all tensors contiguous");
    const int64_t C = x.size(1), H = x.size(2), W = x.size(3), KS = w.size(2);
    TORCH_CHECK(w.size(0) == C && w.size(1) == 1 && w.size(3) == KS && KS % 2 == 1, "weight must be (C, 1, KS, KS), KS odd");
    const int64_t total = x.numel();
    if (total == 0) return;
    const int64_t blocks = (total + kThreads - 1) / kThreads;
    TORCH_CHECK(blocks <= 2147483647LL, "input too large for this kernel's grid");
    depthwise_conv_naive_kernel<<<(unsigned)blocks, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
        reinterpret_cast<const __nv_bfloat16*>(w.data_ptr<at::BFloat16>()),
        reinterpret_cast<const __nv_bfloat16*>(bias.data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), total, (int)C, (int)H, (int)W, (int)KS);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "depthwise conv kernel launch failed: ", cudaGetErrorString(err));
}
"""

CPP_SOURCE = ("void depthwise_conv_forward(torch::Tensor x, torch::Tensor w, torch::Tensor bias, torch::Tensor y, "
              "int64_t stream);")

_ext = load_inline(
    name="rooftop_k2k_depthwise_conv_starter",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["depthwise_conv_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, C: int, KS: int):
        super().__init__()
        # The reference's parameters, conv.weight (C, 1, KS, KS) and conv.bias (C,), bf16: their
        # values are loaded in.
        self.conv = nn.Module()
        self.conv.weight = nn.Parameter(torch.empty(C, 1, KS, KS, dtype=torch.bfloat16), requires_grad=False)
        self.conv.bias = nn.Parameter(torch.empty(C, dtype=torch.bfloat16), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.depthwise_conv_forward(x, self.conv.weight, self.conv.bias, y,
                                    torch.cuda.current_stream(x.device).cuda_stream)
        return y
