// float16 GEMM, C (M x N) = A (M x K) @ B (K x N), all row-major; float32 accumulation.
//
// A plain shared-memory tiled kernel: each block of 256 threads computes a 64 x 64 tile of C,
// walking K in steps of 16. Tiles of A and B are staged in shared memory as float; each thread
// accumulates a 4 x 4 sub-tile whose rows and columns are spread 16 apart, so that reads of the
// B tile are conflict-free and writes of C are coalesced. Every load and store is bounds-checked,
// so any M, N, K work (K = 0 gives zeros).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kTileK = 16;
constexpr int kThreads = 256;  // 16 x 16 threads, 4 x 4 outputs each
constexpr int kSub = 4;

__global__ void __launch_bounds__(kThreads)
gemm_fp16_kernel(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,
                 int M, int N, int K) {
    __shared__ float a_tile[kTileK][kTileM + 1];  // transposed: a_tile[k][m]
    __shared__ float b_tile[kTileK][kTileN];

    const int tid = threadIdx.x;
    const int tx = tid % 16;
    const int ty = tid / 16;
    const int64_t row0 = (int64_t)blockIdx.y * kTileM;
    const int64_t col0 = (int64_t)blockIdx.x * kTileN;

    float acc[kSub][kSub];
#pragma unroll
    for (int i = 0; i < kSub; ++i)
#pragma unroll
        for (int j = 0; j < kSub; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += kTileK) {
        // A tile: kTileM x kTileK = 1024 elements, 4 per thread; consecutive threads read along k.
        for (int idx = tid; idx < kTileM * kTileK; idx += kThreads) {
            const int r = idx / kTileK, c = idx % kTileK;
            const int64_t gr = row0 + r;
            const int gc = k0 + c;
            a_tile[c][r] = (gr < M && gc < K) ? __half2float(A[gr * K + gc]) : 0.0f;
        }
        // B tile: kTileK x kTileN = 1024 elements; consecutive threads read along n.
        for (int idx = tid; idx < kTileK * kTileN; idx += kThreads) {
            const int r = idx / kTileN, c = idx % kTileN;
            const int gr = k0 + r;
            const int64_t gc = col0 + c;
            b_tile[r][c] = (gr < K && gc < N) ? __half2float(B[(int64_t)gr * N + gc]) : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < kTileK; ++kk) {
            float a[kSub], b[kSub];
#pragma unroll
            for (int i = 0; i < kSub; ++i) a[i] = a_tile[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < kSub; ++j) b[j] = b_tile[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < kSub; ++i)
#pragma unroll
                for (int j = 0; j < kSub; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < kSub; ++i) {
        const int64_t r = row0 + ty + 16 * i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < kSub; ++j) {
            const int64_t c = col0 + tx + 16 * j;
            if (c < N) C[r * N + c] = __float2half_rn(acc[i][j]);
        }
    }
}

}  // namespace

// Launches C = A @ B on `stream` (a cudaStream_t; null means the legacy default stream).
// Returns 0 on success, otherwise the cudaError_t of the failed launch.
extern "C" int gemm_fp16(const void* A, const void* B, void* C, int M, int N, int K, void* stream) {
    if (M <= 0 || N <= 0) return 0;
    const dim3 grid((unsigned)((N + kTileN - 1) / kTileN), (unsigned)((M + kTileM - 1) / kTileM));
    if (grid.y > 65535u) return (int)cudaErrorInvalidValue;
    gemm_fp16_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const __half*>(A), static_cast<const __half*>(B), static_cast<__half*>(C), M, N, K);
    return (int)cudaGetLastError();
}
