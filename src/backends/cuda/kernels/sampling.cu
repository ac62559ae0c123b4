// Greedy token selection on the GPU: only the chosen ids cross to the host.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "core/hash_random.h"

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
  if (V % 4 == 0) {
    // 16 values a thread in flight: one block reads a 128k-token row at several times the rate
    // of one load at a time (H100: 19 us a row before).
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int n4 = (limit + 3) / 4;
    for (int i0 = threadIdx.x; i0 < n4; i0 += 4 * kThreads) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        v[u] = i0 + u * kThreads < n4 ? row4[i0 + u * kThreads] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = 4 * (i0 + u * kThreads);
        if (i < limit) better(best, idx, v[u].x, i);
        if (i + 1 < limit) better(best, idx, v[u].y, i + 1);
        if (i + 2 < limit) better(best, idx, v[u].z, i + 2);
        if (i + 3 < limit) better(best, idx, v[u].w, i + 3);
      }
    }
  } else {
    for (int i = threadIdx.x; i < limit; i += kThreads) better(best, idx, row[i], i);
  }
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

// ---- Sampling ---------------------------------------------------------------------------------
namespace lite_llama::cuda {
namespace {

constexpr int kSThreads = 1024;
constexpr int kSearchIters = 24;  // resolves p to 6e-8, below fp32 rounding of exp

// Threshold searches work on probabilities p = exp((l - max) / T) in (0, 1]: count/mass of
// tokens with p >= t, by bisection on t (32 halvings of [0, 1] resolve far below fp32 noise).
__global__ void __launch_bounds__(kSThreads) sample_kernel(float* __restrict__ logits, int V, int limit,
                                                           const ops::SampleRow* __restrict__ args,
                                                           const int32_t* __restrict__ pen_tokens,
                                                           const int32_t* __restrict__ pen_counts,
                                                           int32_t* __restrict__ out) {
  __shared__ float sh[32];
  __shared__ float seg_sum[kSThreads];
  __shared__ int chosen;
  const ops::SampleRow a = args[blockIdx.x];
  float* l = logits + size_t(blockIdx.x) * V;
  // Penalties, in the CPU sampler's order: repetition first, then presence / frequency.
  for (int i = threadIdx.x; i < a.pen_count; i += kSThreads) {
    const int t = pen_tokens[a.pen_offset + i], c = pen_counts[a.pen_offset + i];
    if (t < 0 || t >= limit) continue;
    float v = l[t];
    if (a.repetition_penalty != 1.f) v = v > 0.f ? v / a.repetition_penalty : v * a.repetition_penalty;
    if (c > 0) v -= a.presence_penalty + a.frequency_penalty * float(c);
    l[t] = v;
  }
  __syncthreads();
  float mx = -INFINITY;
  int arg = 0x7fffffff;
  for (int i = threadIdx.x; i < limit; i += kSThreads) {
    const float v = l[i];
    if (v > mx || (v == mx && i < arg)) mx = v, arg = i;
  }
  if (a.temperature == 0.f) {  // greedy: argmax, lowest index on ties
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float v2 = __shfl_xor_sync(0xffffffffu, mx, o);
      const int i2 = __shfl_xor_sync(0xffffffffu, arg, o);
      if (v2 > mx || (v2 == mx && i2 < arg)) mx = v2, arg = i2;
    }
    __shared__ float bv[32];
    __shared__ int bi[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) bv[warp] = mx, bi[warp] = arg;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kSThreads / 32; ++w)
        if (bv[w] > bv[0] || (bv[w] == bv[0] && bi[w] < bi[0])) bv[0] = bv[w], bi[0] = bi[w];
      out[blockIdx.x] = bi[0] == 0x7fffffff ? 0 : bi[0];
    }
    return;
  }
  const float lmax = block_max(mx, sh);
  const float inv_t = 1.f / a.temperature;
  // Probabilities (unnormalised, max 1) replace the logits once; the searches then only read.
  for (int i = threadIdx.x; i < limit; i += kSThreads) l[i] = __expf((l[i] - lmax) * inv_t);
  __syncthreads();
  auto prob = [&](int i) { return l[i]; };
  auto count_ge = [&](float t) {
    float c = 0.f;
    for (int i = threadIdx.x; i < limit; i += kSThreads) c += prob(i) >= t ? 1.f : 0.f;
    return block_sum(c, sh);
  };
  auto mass_ge = [&](float t) {
    float m = 0.f;
    for (int i = threadIdx.x; i < limit; i += kSThreads) {
      const float p = prob(i);
      m += p >= t ? p : 0.f;
    }
    return block_sum(m, sh);
  };
  // top-k: the largest t with at least k tokens at or above it.
  float t0 = 0.f;
  if (a.top_k > 0 && a.top_k < limit) {
    float lo = 0.f, hi = 1.f;
    for (int it = 0; it < kSearchIters; ++it) {
      const float mid = 0.5f * (lo + hi);
      if (count_ge(mid) >= float(a.top_k)) lo = mid; else hi = mid;
    }
    t0 = lo;
  }
  // top-p over what top-k kept: the largest t whose mass reaches top_p of that total.
  float t1 = t0;
  if (a.top_p < 1.f) {
    const float target = a.top_p * mass_ge(t0);
    float lo = t0, hi = 1.f;
    for (int it = 0; it < kSearchIters; ++it) {
      const float mid = 0.5f * (lo + hi);
      if (mass_ge(mid) >= target) lo = mid; else hi = mid;
    }
    t1 = lo;
  }
  // min-p is relative to the most likely token, whose p is 1.
  const float t = fmaxf(t1, a.min_p);
  // Inverse CDF in vocabulary order: segment sums, a scan over segments, then one thread walks.
  const int per = (limit + kSThreads - 1) / kSThreads;
  const int b = threadIdx.x * per, e = min(limit, b + per);
  float s = 0.f;
  for (int i = b; i < e; ++i) {
    const float p = prob(i);
    s += p >= t ? p : 0.f;
  }
  seg_sum[threadIdx.x] = s;
  if (threadIdx.x == 0) chosen = -1;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int i = 0; i < kSThreads; ++i) total += seg_sum[i];
    const uint64_t r = splitmix64(a.seed ^ splitmix64(a.counter + 0x632be59bd9b4e019ull));
    double u = double(r >> 11) * (1.0 / 9007199254740992.0) * total;
    int seg = 0;
    for (; seg < kSThreads - 1; ++seg) {
      if (u < seg_sum[seg]) break;
      u -= seg_sum[seg];
    }
    int pick = -1;
    const int sb = seg * per, se = min(limit, sb + per);
    for (int i = sb; i < se; ++i) {
      const float p = prob(i);
      if (p < t) continue;
      pick = i;  // the last kept token also absorbs rounding at the very end
      if (u < p) break;
      u -= p;
    }
    if (pick < 0) pick = arg;  // cannot happen with t <= 1 (the max has p == 1); kept safe
    chosen = pick;
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = chosen;
}

}  // namespace

cudaError_t sample_rows(float* logits, int rows, int V, int limit, const ops::SampleRow* args,
                        const int32_t* pen_tokens, const int32_t* pen_counts, int32_t* out,
                        cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  sample_kernel<<<rows, kSThreads, 0, s>>>(logits, V, limit, args, pen_tokens, pen_counts, out);
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
