"""Broken on purpose: the CUDA source uses an identifier it never declares (`row_total`), so
nvcc rejects it and the evaluation must report a compile error."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const float* xr = x + (int64_t)blockIdx.x * n;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
    atomicAdd(&y[blockIdx.x], row_total);  // error: row_total is not declared anywhere
}

torch::Tensor row_sum_forward(torch::Tensor x, int64_t stream) {
    auto y = torch::zeros({x.size(0)}, x.options());
    row_sum_kernel<<<(unsigned int)x.size(0), 256, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}
"""

CPP_SOURCE = "torch::Tensor row_sum_forward(torch::Tensor x, int64_t stream);"

_ext = load_inline(
    name="rooftop_examples_row_sum_broken",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["row_sum_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_sum_forward(x, torch.cuda.current_stream(x.device).cuda_stream)
