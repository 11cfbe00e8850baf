"""Starter: per-row 256-bin histograms of uint8 data in CUDA C++ (load_inline), correct but slow.

One thread per input byte: it works out its row with a 64-bit division and does one atomicAdd on
the output in global memory. Every byte becomes a global atomic, and the popular bins of a row
(its mid-grey bulk) see long queues of them; the loads are single bytes.
"""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr int kBins = 256;

__global__ void histogram_global_atomics_kernel(const uint8_t* __restrict__ x, int* __restrict__ counts,
                                                int64_t total, int64_t cols) {
    const int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    if (i >= total) return;
    const int64_t row = i / cols;
    atomicAdd(&counts[row * kBins + x[i]], 1);
}

}  // namespace

void histogram_forward(torch::Tensor x, torch::Tensor counts, int64_t stream) {
    TORCH_CHECK(x.is_cuda() && counts.is_cuda(), "x and counts must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kUInt8, "x must be uint8");
    TORCH_CHECK(counts.scalar_type() == torch::kInt32, "counts must be int32");
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && counts.is_contiguous(), "x must be 2-D and contiguous");
    const int64_t rows = x.size(0), cols = x.size(1);
    TORCH_CHECK(counts.size(0) == rows && counts.size(1) == kBins, "counts must be (rows, 256)");
    const int64_t total = rows * cols;
    if (total == 0) return;
    const int64_t blocks = (total + kThreads - 1) / kThreads;
    TORCH_CHECK(blocks <= 2147483647LL, "input too large for this kernel's grid");
    histogram_global_atomics_kernel<<<(unsigned)blocks, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        x.data_ptr<uint8_t>(), counts.data_ptr<int>(), total, cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "histogram kernel launch failed: ", cudaGetErrorString(err));
}
"""

CPP_SOURCE = "void histogram_forward(torch::Tensor x, torch::Tensor counts, int64_t stream);"

_ext = load_inline(
    name="rooftop_k2k_histogram_starter",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["histogram_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        counts = torch.zeros((x.shape[0], 256), dtype=torch.int32, device=x.device)
        _ext.histogram_forward(x, counts, torch.cuda.current_stream(x.device).cuda_stream)
        return counts
