// Greedy token selection on the GPU: only the chosen ids cross to the host.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ void better(float& v, int& i, float v2, int i2) {
  // Larger value wins; equal values keep the lower index (torch.argmax / numpy semantics).
  if (v2 > v || (v2 == v && i2 < i)) v = v2, i = i2;
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int V, int limit,
                                                          int32_t* __restrict__ out) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const float* row = logits + size_t(blockIdx.x) * V;
  float best = -INFINITY;
  int idx = 0x7fffffff;
  for (int i = threadIdx.x; i < limit; i += kThreads) better(best, idx, row[i], i);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float v2 = __shfl_xor_sync(0xffffffffu, best, o);
    int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    better(best, idx, v2, i2);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = best, si[warp] = idx;
  __syncthreads();
  if (warp == 0) {
    best = lane < kThreads / 32 ? sv[lane] : -INFINITY;
    idx = lane < kThreads / 32 ? si[lane] : 0x7fffffff;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      float v2 = __shfl_xor_sync(0xffffffffu, best, o);
      int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
      better(best, idx, v2, i2);
    }
    // All -inf or NaN rows still yield a valid id.
    if (lane == 0) out[blockIdx.x] = idx == 0x7fffffff ? 0 : idx;
  }
}

}  // namespace

cudaError_t argmax_rows(const float* logits, int rows, int V, int limit, int32_t* out, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  argmax_kernel<<<rows, kThreads, 0, s>>>(logits, V, limit, out);
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
