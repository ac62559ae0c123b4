// Logprobs on the GPU (Backend::score_rows): a row's log-softmax at its target token, the target's
// rank, the argmax and the top k, so that only a few words a row cross to the host instead of the
// row (128k floats: scoring a 2k-token prompt copied 1 GiB and took two exp passes a row on the CPU).
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kNone = 0x7fffffff;

// (v, i) before (v2, i2) in the order the host's partial_sort gives: larger value, then lower index.
__device__ __forceinline__ bool before(float v, int i, float v2, int i2) { return v > v2 || (v == v2 && i < i2); }

__device__ __forceinline__ void keep_best(float& v, int& i, float v2, int i2) {
  if (i2 != kNone && (i == kNone || before(v2, i2, v, i))) v = v2, i = i2;
}

// The block's best (value, index); every thread gets it.
__device__ void block_best(float& v, int& i, float* sv, int* si) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) keep_best(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // sv / si of a previous call are read
  if (lane == 0) sv[warp] = v, si[warp] = i;
  __syncthreads();
  v = lane < kThreads / 32 ? sv[lane] : -INFINITY;
  i = lane < kThreads / 32 ? si[lane] : kNone;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) keep_best(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
}

template <typename T>
__device__ T block_sum(T x, T* sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) sh[warp] = x;
  __syncthreads();
  x = lane < kThreads / 32 ? sh[lane] : T(0);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Calls f(value, column) for this thread's columns of [0, limit), four float4 loads in flight.
template <typename F>
__device__ __forceinline__ void for_row(const float* row, int limit, bool vec, F&& f) {
  if (vec) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int n4 = limit / 4;
    for (int i0 = threadIdx.x; i0 < n4; i0 += 4 * kThreads) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (i0 + u * kThreads < n4) v[u] = row4[i0 + u * kThreads];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (i0 + u * kThreads < n4) {
          const int i = 4 * (i0 + u * kThreads);
          f(v[u].x, i), f(v[u].y, i + 1), f(v[u].z, i + 2), f(v[u].w, i + 3);
        }
    }
    for (int i = 4 * n4 + int(threadIdx.x); i < limit; i += kThreads) f(row[i], i);
  } else {
    for (int i = threadIdx.x; i < limit; i += kThreads) f(row[i], i);
  }
}

__global__ void __launch_bounds__(kThreads)
    score_rows_kernel(const float* __restrict__ logits, int V, int limit, const int32_t* __restrict__ targets,
                      int top_k, ops::RowScore* __restrict__ out, ops::TopToken* __restrict__ top) {
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ unsigned long long sn[32];
  const float* row = logits + size_t(blockIdx.x) * V;
  const bool vec = V % 4 == 0;
  // Maximum and argmax (lowest index on ties), as the host's.
  float mx = -INFINITY;
  int am = kNone;
  for_row(row, limit, vec, [&](float v, int i) { keep_best(mx, am, v, i); });
  block_best(mx, am, sv, si);
  // The sum of exp(x - max): fp32 per thread over a few hundred terms, then a tree (the host sums
  // in double; both round lse to a float).
  float s = 0;
  if (mx > -INFINITY) for_row(row, limit, vec, [&](float v, int) { s += expf(v - mx); });
  s = block_sum(s, sv);
  const float lse = mx + logf(s);
  const int t = targets[blockIdx.x];
  const float lp = (t >= 0 && t < limit ? row[t] : -INFINITY) - lse;
  // Rank: compared as the reported logprobs (x - lse in fp32), so a tie there is a tie here.
  unsigned long long above = 0;
  for_row(row, limit, vec, [&](float v, int) { above += (v - lse) > lp; });
  above = block_sum(above, sn);
  if (threadIdx.x == 0) out[blockIdx.x] = ops::RowScore{lp, int32_t(above + 1), am == kNone ? 0 : am};
  // Top k: k passes, each the best of what follows the previous pick in (value, index) order.
  float pv = mx;
  int pi = am;
  const int k = min(top_k, limit);
  for (int j = 0; j < k; ++j) {
    if (j > 0) {
      float bv = -INFINITY;
      int bi = kNone;
      for_row(row, limit, vec, [&](float v, int i) {
        if (before(pv, pi, v, i)) keep_best(bv, bi, v, i);
      });
      block_best(bv, bi, sv, si);
      pv = bv, pi = bi;
    }
    if (threadIdx.x == 0) top[size_t(blockIdx.x) * top_k + j] = ops::TopToken{pi == kNone ? 0 : pi, pv - lse};
  }
}

}  // namespace

cudaError_t score_rows(const float* logits, int rows, int V, int limit, const int32_t* targets, int top_k,
                       ops::RowScore* out, ops::TopToken* top, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  score_rows_kernel<<<rows, kThreads, 0, s>>>(logits, V, limit, targets, top_k, out, top);
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
