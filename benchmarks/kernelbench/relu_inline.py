"""A KernelBench-style solution for level 1 problem 19 (ReLU): one load_inline CUDA kernel,
launched on the legacy default stream as most KernelBench solutions are written."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void relu_kernel(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel();
    long n4 = n / 4;
    int threads = 256;
    int blocks = 132 * 16;
    if (n4 > 0) {
        relu_kernel<<<blocks, threads>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                         reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    if (n > n4 * 4) {
        relu_tail<<<1, 4>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    }
    return y;
}
"""

cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu = load_inline(name="relu_inline", cpp_sources=cpp_source, cuda_sources=cuda_source,
                   functions=["relu_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu.relu_cuda(x)
