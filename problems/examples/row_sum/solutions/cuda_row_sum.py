"""Row sum in CUDA C++ through torch.utils.cpp_extension.load_inline.

One block per row: each thread sums a strided slice of the row in float32, warp shuffles reduce
within each warp, and the first warp reduces the per-warp sums from shared memory. Works for any
N. The kernel runs on PyTorch's current stream, whose handle is passed in from Python.
"""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void __launch_bounds__(kThreads)
row_sum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const float* xr = x + (int64_t)blockIdx.x * n;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) s += xr[i];
    s = warp_sum(s);

    __shared__ float partial[kThreads / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) partial[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < kThreads / 32 ? partial[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) y[blockIdx.x] = s;
    }
}

}  // namespace

torch::Tensor row_sum_forward(torch::Tensor x, int64_t stream) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    x = x.contiguous();
    const int64_t rows = x.size(0), cols = x.size(1);
    auto y = torch::zeros({rows}, x.options());
    if (rows == 0 || cols == 0) return y;
    TORCH_CHECK(rows <= 2147483647LL, "too many rows");
    row_sum_kernel<<<(unsigned int)rows, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), cols);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "row_sum kernel launch failed: ", cudaGetErrorString(err));
    return y;
}
"""

CPP_SOURCE = "torch::Tensor row_sum_forward(torch::Tensor x, int64_t stream);"

_ext = load_inline(
    name="rooftop_examples_row_sum",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["row_sum_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_sum_forward(x, torch.cuda.current_stream(x.device).cuda_stream)
