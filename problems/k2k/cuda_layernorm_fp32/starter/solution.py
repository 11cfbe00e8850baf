"""Starter: LayerNorm in CUDA C++ (load_inline) with one thread per row, correct but slow.

Each thread owns a whole row and walks it three times (sum for the mean, sum of squared
deviations for the variance, both accumulated in double, then normalise and write). Neighbouring
threads of a warp read different rows, so no load is coalesced, and with one thread per row a few
thousand rows give the GPU only a few warps per SM.
"""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <stdint.h>

namespace {

constexpr int kThreads = 128;

__global__ void layernorm_thread_per_row_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                const float* __restrict__ b, float* __restrict__ y,
                                                int64_t rows, int64_t n, float eps) {
    const int64_t row = (int64_t)blockIdx.x * kThreads + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * n;
    float* yr = y + row * n;
    // one long sequential sum per thread: accumulated in double, since a float32 running sum over
    // a million elements drifts past the tolerance
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += xr[i];
    const float mean = (float)(sum / (double)n);
    double sq = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float d = xr[i] - mean;
        sq += (double)d * d;
    }
    const float rstd = (float)(1.0 / sqrt(sq / (double)n + (double)eps));
    for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
}

}  // namespace

void layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor y, double eps,
                       int64_t stream) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda() && y.is_cuda(), "tensors must be on the GPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32 && y.scalar_type() == torch::kFloat32, "tensors must be float32");
    TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && y.is_contiguous() && w.is_contiguous() && b.is_contiguous(),
                "x must be 2-D; all tensors contiguous");
    const int64_t rows = x.size(0), n = x.size(1);
    if (rows == 0 || n == 0) return;
    const int64_t blocks = (rows + kThreads - 1) / kThreads;
    layernorm_thread_per_row_kernel<<<(unsigned)blocks, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), rows, n, (float)eps);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "layernorm kernel launch failed: ", cudaGetErrorString(err));
}
"""

CPP_SOURCE = ("void layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor y, "
              "double eps, int64_t stream);")

_ext = load_inline(
    name="rooftop_k2k_layernorm_starter",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        # The reference's parameters, ln.weight and ln.bias ((N,) float32): their values are loaded in.
        self.ln = nn.Module()
        self.ln.weight = nn.Parameter(torch.empty(hidden_size, dtype=torch.float32), requires_grad=False)
        self.ln.bias = nn.Parameter(torch.empty(hidden_size, dtype=torch.float32), requires_grad=False)
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, y, self.eps,
                               torch.cuda.current_stream(x.device).cuda_stream)
        return y
