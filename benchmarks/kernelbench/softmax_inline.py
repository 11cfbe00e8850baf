"""A KernelBench-style solution for level 1 problem 23 (Softmax over dim 1): one block per row,
an online max-and-sum pass and a normalizing pass, in a load_inline CUDA kernel launched on the
legacy default stream."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cfloat>

__device__ __forceinline__ void merge(float& m, float& s, float om, float os) {
    float nm = fmaxf(m, om);
    s = (m == -FLT_MAX ? 0.f : s * __expf(m - nm)) + (om == -FLT_MAX ? 0.f : os * __expf(om - nm));
    m = nm;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, long cols) {
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.f;
    for (long j = threadIdx.x; j < cols; j += blockDim.x) {
        float v = row[j];
        if (v > m) { s = s * __expf(m - v) + 1.f; m = v; } else { s += __expf(v - m); }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float om = __shfl_xor_sync(0xffffffff, m, offset);
        float os = __shfl_xor_sync(0xffffffff, s, offset);
        merge(m, s, om, os);
    }
    __shared__ float sm[32], ss[32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        int warps = blockDim.x / 32;
        m = lane < warps ? sm[lane] : -FLT_MAX;
        s = lane < warps ? ss[lane] : 0.f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            float om = __shfl_xor_sync(0xffffffff, m, offset);
            float os = __shfl_xor_sync(0xffffffff, s, offset);
            merge(m, s, om, os);
        }
        if (lane == 0) { sm[0] = m; ss[0] = s; }
    }
    __syncthreads();
    float rm = sm[0], inv = 1.f / ss[0];
    for (long j = threadIdx.x; j < cols; j += blockDim.x) {
        out[j] = __expf(row[j] - rm) * inv;
    }
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected 2-D float32 CUDA");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_rows<<<xc.size(0), 1024>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""

cpp_source = "torch::Tensor softmax_cuda(torch::Tensor x);"

softmax = load_inline(name="softmax_inline", cpp_sources=cpp_source, cuda_sources=cuda_source,
                      functions=["softmax_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax.softmax_cuda(x)
