"""Starter: NCHW -> NHWC layout conversion (bf16) in CUDA C++ (load_inline), correct but slow.

One thread per element in input order: a warp reads 32 consecutive bf16 of one (n, c) plane
(64 coalesced bytes) and writes them C elements (2*C bytes) apart in the output, so every store of
a warp touches 32 different sectors. Each image is a (C, H*W) -> (H*W, C) transpose; a tiled
transpose through shared memory makes both sides coalesced.
"""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;

__global__ void nchw_to_nhwc_naive_kernel(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                          int64_t total, int64_t C, int64_t HW) {
    const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;  // index in NCHW order
    if (i >= total) return;
    const int64_t p = i % HW;  // h * W + w
    const int64_t c = (i / HW) % C;
    const int64_t n = i / (HW * C);
    y[(n * HW + p) * C + c] = x[i];
}

}  // namespace

void nchw_to_nhwc_forward(torch::Tensor x, torch::Tensor y, int64_t stream) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "x and y must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kBFloat16 && y.scalar_type() == torch::kBFloat16, "x and y must be bf16");
    TORCH_CHECK(x.dim() == 4 && x.is_contiguous() && y.is_contiguous(), "x must be 4-D NCHW; both contiguous");
    const int64_t C = x.size(1), HW = x.size(2) * x.size(3);
    const int64_t total = x.numel();
    TORCH_CHECK(y.numel() == total, "y must have as many elements as x");
    if (total == 0) return;
    const int64_t blocks = (total + kThreads - 1) / kThreads;
    TORCH_CHECK(blocks <= 2147483647LL, "input too large for this kernel's grid");
    nchw_to_nhwc_naive_kernel<<<(unsigned)blocks, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()), total, C, HW);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "nchw_to_nhwc kernel launch failed: ", cudaGetErrorString(err));
}
"""

CPP_SOURCE = "void nchw_to_nhwc_forward(torch::Tensor x, torch::Tensor y, int64_t stream);"

_ext = load_inline(
    name="rooftop_k2k_nchw_to_nhwc_starter",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["nchw_to_nhwc_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        y = torch.empty((B, H, W, C), dtype=torch.bfloat16, device=x.device)
        _ext.nchw_to_nhwc_forward(x, y, torch.cuda.current_stream(x.device).cuda_stream)
        return y
