// Mixture of experts on CUDA, without a host round trip (CUDA graphs stay possible): the router's
// softmax top-k, the token-expert assignments counting-sorted by expert, a grouped GEMV over the
// active experts (each weight row is read once for up to kMoeTokens assignments of its expert, so
// a decode step reads only the active experts' weights), and the weighted combine in ascending
// expert order, as transformers sums them.
#include <climits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

constexpr int kRoutePer = kMoeMaxExperts / 32;  // router probabilities per lane
constexpr int kMoeTokens = 8;                   // assignments one weight row is applied to at once
constexpr int kRowsPerWarp = 2;
constexpr int kWarps = 8;
constexpr int kRowsPerBlock = kRowsPerWarp * kWarps;

// One warp per token: softmax (fp32), then top_k rounds of a warp argmax (lowest index on ties).
template <typename T>
__global__ void moe_route_kernel(const T* __restrict__ logits, int n_tokens, int E, int k, bool norm,
                                 int32_t* __restrict__ t_expert, float* __restrict__ t_weight) {
  const int tok = int((int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
  if (tok >= n_tokens) return;
  const T* l = logits + size_t(tok) * E;
  float p[kRoutePer];
  float mx = -INFINITY;
#pragma unroll
  for (int c = 0; c < kRoutePer; ++c) {
    const int i = c * 32 + lane;
    p[c] = i < E ? to_f(l[i]) : -INFINITY;
    mx = fmaxf(mx, p[c]);
  }
  mx = warp_max(mx);
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < kRoutePer; ++c) {
    const int i = c * 32 + lane;
    p[c] = i < E ? expf(p[c] - mx) : -1.f;  // -1: not a candidate (taken, or past E)
    sum += i < E ? p[c] : 0.f;
  }
  sum = warp_sum(sum);
  float kept = 0.f;
  for (int j = 0; j < k; ++j) {
    float bp = -1.f;
    int bi = INT_MAX;
#pragma unroll
    for (int c = 0; c < kRoutePer; ++c)
      if (p[c] > bp) bp = p[c], bi = c * 32 + lane;  // ascending i: the lowest index wins ties
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (op > bp || (op == bp && oi < bi)) bp = op, bi = oi;
    }
#pragma unroll
    for (int c = 0; c < kRoutePer; ++c)
      if (c * 32 + lane == bi) p[c] = -1.f;
    kept += bp / sum;
    if (lane == 0) t_expert[size_t(tok) * k + j] = bi, t_weight[size_t(tok) * k + j] = bp / sum;
  }
  if (norm && lane == 0)
    for (int j = 0; j < k; ++j) t_weight[size_t(tok) * k + j] /= kept;
}

// Counting sort of the n assignments by expert (one block): start[e] .. start[e + 1] are expert
// e's slots, order[slot] its assignment and slot_of[assignment] the inverse.
__global__ void moe_sort_kernel(const int32_t* __restrict__ t_expert, int n, int E, int32_t* __restrict__ start,
                                int32_t* __restrict__ order, int32_t* __restrict__ slot_of) {
  __shared__ int cnt[kMoeMaxExperts], pos[kMoeMaxExperts];
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int a = threadIdx.x; a < n; a += blockDim.x) atomicAdd(&cnt[t_expert[a]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (int e = 0; e < E; ++e) start[e] = pos[e] = s, s += cnt[e];
    start[E] = s;
  }
  __syncthreads();
  for (int a = threadIdx.x; a < n; a += blockDim.x) {
    const int slot = atomicAdd(&pos[t_expert[a]], 1);
    order[slot] = a;
    slot_of[a] = slot;
  }
}

// out[slot, r] = W[e, r, :] . in_row(slot) for every slot of expert e = blockIdx.y, rows r of
// this block. in_row(slot) is in[order[slot] / top_k] (the token's hidden state) with `order`,
// else in[slot]. Each warp holds kRowsPerWarp rows' products for kMoeTokens slots at a time.
template <typename T, typename O>
__global__ void __launch_bounds__(kWarps * 32)
    moe_group_gemv_kernel(const T* __restrict__ W, int N, int K, const T* __restrict__ in,
                          const int32_t* __restrict__ order, int top_k, const int32_t* __restrict__ start,
                          O* __restrict__ out) {
  const int e = blockIdx.y;
  const int s0 = start[e], s1 = start[e + 1];
  if (s0 == s1) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = blockIdx.x * kRowsPerBlock + warp * kRowsPerWarp;
  if (r0 >= N) return;
  const T* w = W + (size_t(e) * N + r0) * K;
  for (int c0 = s0; c0 < s1; c0 += kMoeTokens) {
    const int m = min(kMoeTokens, s1 - c0);
    const T* x[kMoeTokens];
#pragma unroll
    for (int t = 0; t < kMoeTokens; ++t) {
      const int slot = c0 + min(t, m - 1);
      x[t] = in + size_t(order ? order[slot] / top_k : slot) * K;
    }
    float acc[kRowsPerWarp][kMoeTokens] = {};
    for (int kk = lane * 8; kk < K; kk += 32 * 8) {
      float wv[kRowsPerWarp][8] = {};
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        if (r0 + r < N) load8<T>(w + size_t(r) * K + kk, wv[r]);
#pragma unroll
      for (int t = 0; t < kMoeTokens; ++t) {
        if (t >= m) break;
        float xv[8];
        load8<T>(x[t] + kk, xv);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][t] += wv[r][i] * xv[i];
      }
    }
#pragma unroll
    for (int t = 0; t < kMoeTokens; ++t) {
      if (t >= m) break;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0 && r0 + r < N) out[size_t(c0 + t) * N + r0 + r] = from_f<O>(v);
      }
    }
  }
}

// out[t] = sum over j in ascending expert order of t_weight[t, j] * y[slot_of[t, j]].
template <typename O>
__global__ void moe_combine_kernel(const float* __restrict__ y, int H, const int32_t* __restrict__ t_expert,
                                   const float* __restrict__ t_weight, const int32_t* __restrict__ slot_of, int k,
                                   O* __restrict__ out) {
  __shared__ int ord[kMoeMaxTopK];
  const size_t t = blockIdx.x;
  if (threadIdx.x == 0) {
    for (int j = 0; j < k; ++j) ord[j] = j;
    for (int i = 1; i < k; ++i)  // insertion sort by expert, stable
      for (int j = i; j > 0 && t_expert[t * k + ord[j]] < t_expert[t * k + ord[j - 1]]; --j) {
        const int s = ord[j];
        ord[j] = ord[j - 1], ord[j - 1] = s;
      }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    float acc = 0.f;
    for (int jj = 0; jj < k; ++jj) {
      const int j = ord[jj];
      acc += t_weight[t * k + j] * y[size_t(slot_of[t * k + j]) * H + i];
    }
    out[t * H + i] = from_f<O>(acc);
  }
}

template <typename T>
cudaError_t experts_typed(const MoeArgs& a, cudaStream_t s) {
  const int n = a.tokens * a.top_k;
  moe_sort_kernel<<<1, 1024, 0, s>>>(a.t_expert, n, a.experts, a.start, a.order, a.slot_of);
  const int F2 = 2 * a.ffn;
  moe_group_gemv_kernel<T, T><<<dim3(ceil_div(F2, kRowsPerBlock), a.experts), kWarps * 32, 0, s>>>(
      static_cast<const T*>(a.w_gate_up), F2, a.hidden, static_cast<const T*>(a.x), a.order, a.top_k, a.start,
      static_cast<T*>(a.gate_up));
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (cudaError_t e = swiglu(a.act, a.gate_up, a.h, n, a.ffn, s, nullptr); e != cudaSuccess) return e;
  moe_group_gemv_kernel<T, float><<<dim3(ceil_div(a.hidden, kRowsPerBlock), a.experts), kWarps * 32, 0, s>>>(
      static_cast<const T*>(a.w_down), a.hidden, a.ffn, static_cast<const T*>(a.h), nullptr, a.top_k, a.start,
      a.y);
  if (a.out_f32)
    moe_combine_kernel<float><<<a.tokens, 256, 0, s>>>(a.y, a.hidden, a.t_expert, a.t_weight, a.slot_of, a.top_k,
                                                       static_cast<float*>(a.out));
  else
    moe_combine_kernel<T><<<a.tokens, 256, 0, s>>>(a.y, a.hidden, a.t_expert, a.t_weight, a.slot_of, a.top_k,
                                                   static_cast<T*>(a.out));
  return cudaGetLastError();
}

}  // namespace

cudaError_t moe_route(Act act, const void* logits, int tokens, int experts, int top_k, bool norm_topk_prob,
                      int32_t* t_expert, float* t_weight, cudaStream_t s) {
  if (experts < 1 || experts > kMoeMaxExperts || top_k < 1 || top_k > experts || top_k > kMoeMaxTopK)
    return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  const unsigned grid = ceil_div(int64_t(tokens) * 32, 256);
  if (act == Act::BF16)
    moe_route_kernel<__nv_bfloat16><<<grid, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(logits), tokens, experts,
                                                         top_k, norm_topk_prob, t_expert, t_weight);
  else
    moe_route_kernel<__half><<<grid, 256, 0, s>>>(static_cast<const __half*>(logits), tokens, experts, top_k,
                                                  norm_topk_prob, t_expert, t_weight);
  return cudaGetLastError();
}

cudaError_t moe_experts(const MoeArgs& a, cudaStream_t s) {
  if (a.experts < 1 || a.experts > kMoeMaxExperts || a.top_k < 1 || a.top_k > kMoeMaxTopK || a.hidden % 8 != 0 ||
      a.ffn % 8 != 0)
    return cudaErrorInvalidValue;
  if (a.tokens == 0) return cudaSuccess;
  return a.act == Act::BF16 ? experts_typed<__nv_bfloat16>(a, s) : experts_typed<__half>(a, s);
}

size_t moe_workspace_bytes(int tokens, int top_k, int experts, int hidden, int ffn) {
  const size_t n = size_t(tokens) * size_t(top_k);
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  return up(n * 4) * 2 + up(size_t(experts + 1) * 4) + up(n * size_t(2 * ffn) * 2) + up(n * size_t(ffn) * 2) +
         up(n * size_t(hidden) * 4);
}

}  // namespace lite_llama::cuda
