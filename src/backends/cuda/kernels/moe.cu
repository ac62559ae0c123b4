// Mixture of experts on CUDA, without a host round trip (CUDA graphs stay possible): the router's
// softmax top-k; then either (decode-sized steps) the GEMV path of moe_gemv.cu, which reads only
// the active experts' rows and needs no sort, or (prefill-sized) the token-expert assignments
// counting-sorted by expert into tiles for the tensor-core grouped GEMM of moe_gemm.cu; and the
// weighted combine in ascending expert order, as transformers sums them.
#include <algorithm>
#include <climits>
#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/moe_internal.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"
#include "core/gq.h"

namespace lite_llama::cuda {
namespace {

constexpr int kRoutePer = kMoeMaxExperts / 32;  // router probabilities per lane

// One warp per token: softmax (fp32), then top_k rounds of a warp argmax (lowest index on ties).
template <typename T>
__global__ void moe_route_kernel(const T* __restrict__ logits, int n_tokens, int E, int k, bool norm,
                                 int32_t* __restrict__ t_expert, float* __restrict__ t_weight) {
  pdl_wait();     // launched with PDL: the router's logits are complete only now
  pdl_trigger();  // the gate|up GEMV (PDL) may take the SMs and wait there for the routing
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
  // Lane j keeps the j-th pick and writes it once (no read-back of the weights to normalise).
  float kept = 0.f, my_w = 0.f;
  int my_e = 0;
  for (int j = 0; j < k; ++j) {
    float bp = -1.f;
    int bi = INT_MAX;
#pragma unroll
    for (int c = 0; c < kRoutePer; ++c)
      if (p[c] > bp) bp = p[c], bi = c * 32 + lane;  // ascending i: the lowest index wins ties
#if __CUDA_ARCH__ >= 800
    // Two warp reductions instead of five shuffle pairs: candidates are >= 0 (expf), whose bits
    // order as unsigned integers; key 0 = no candidate. Then the lowest index of the best value.
    const unsigned key = bp >= 0.f ? __float_as_uint(bp) + 1u : 0u;
    const unsigned best = __reduce_max_sync(0xffffffffu, key);
    bi = int(__reduce_min_sync(0xffffffffu, key == best ? unsigned(bi) : 0xffffffffu));
    bp = best ? __uint_as_float(best - 1u) : -1.f;
#else
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, bp, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (op > bp || (op == bp && oi < bi)) bp = op, bi = oi;
    }
#endif
#pragma unroll
    for (int c = 0; c < kRoutePer; ++c)
      if (c * 32 + lane == bi) p[c] = -1.f;
    kept += bp / sum;
    if (lane == j) my_e = bi, my_w = bp / sum;
  }
  if (lane < k) t_expert[size_t(tok) * k + lane] = my_e, t_weight[size_t(tok) * k + lane] = norm ? my_w / kept : my_w;
}

// Counting sort of the n assignments by expert (one block): start[e] .. start[e + 1] are expert
// e's slots, order[slot] its assignment and slot_of[assignment] the inverse; tiles lists each
// expert's runs of up to moe::kTileM slots (expert, first slot), *n_tiles of them.
__global__ void moe_sort_kernel(const int32_t* __restrict__ t_expert, int n, int E, int32_t* __restrict__ start,
                                int32_t* __restrict__ order, int32_t* __restrict__ slot_of,
                                int32_t* __restrict__ tiles, int32_t* __restrict__ n_tiles) {
  __shared__ int cnt[kMoeMaxExperts], pos[kMoeMaxExperts];
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int a = threadIdx.x; a < n; a += blockDim.x) atomicAdd(&cnt[t_expert[a]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0, nt = 0;
    for (int e = 0; e < E; ++e) {
      start[e] = pos[e] = s;
      for (int j = 0; j < cnt[e]; j += moe::kTileM) tiles[2 * nt] = e, tiles[2 * nt + 1] = s + j, ++nt;
      s += cnt[e];
    }
    start[E] = s;
    *n_tiles = nt;
  }
  __syncthreads();
  for (int a = threadIdx.x; a < n; a += blockDim.x) {
    const int slot = atomicAdd(&pos[t_expert[a]], 1);
    order[slot] = a;
    slot_of[a] = slot;
  }
}

// out[t] = sum over j in ascending expert order of t_weight[t, j] * y[slot_of[t, j]] (y[t k + j]
// without slot_of).
template <typename O>
__global__ void moe_combine_kernel(const float* __restrict__ y, int H, const int32_t* __restrict__ t_expert,
                                   const float* __restrict__ t_weight, const int32_t* __restrict__ slot_of, int k,
                                   O* __restrict__ out) {
  __shared__ int ex[kMoeMaxTopK], src[kMoeMaxTopK];
  __shared__ float wt[kMoeMaxTopK];
  __shared__ int ord[kMoeMaxTopK];
  const size_t t = blockIdx.x;
  const int j = threadIdx.x;
  // The routing is read before the wait, so that only y's loads are left after it: it is complete
  // (the gate|up GEMV waited for it, and this starts only after the down GEMV's blocks have waited
  // for the gate|up one), and the next layer's routing waits for this kernel.
  if (j < k) ex[j] = t_expert[t * k + j];
  __syncthreads();
  if (j < k) {  // j's rank in ascending (expert, j) order
    int rank = 0;
    for (int i = 0; i < k; ++i) rank += ex[i] < ex[j] || (ex[i] == ex[j] && i < j);
    ord[rank] = j;
    src[j] = slot_of ? slot_of[t * k + j] : int(t) * k + j;
    wt[j] = t_weight[t * k + j];
  }
  __syncthreads();
  pdl_wait();  // launched with PDL after the down GEMV: y is complete only now
  // Four columns a thread, every expert's row requested before the sum (in expert order) starts.
  const int i = (int(blockIdx.y) * blockDim.x + threadIdx.x) * 4;
  if (i >= H) return;
  float4 v[kMoeMaxTopK];
#pragma unroll
  for (int jj = 0; jj < kMoeMaxTopK; ++jj)
    if (jj < k) v[jj] = *reinterpret_cast<const float4*>(y + size_t(src[ord[jj]]) * H + i);
  float acc[4] = {};
#pragma unroll
  for (int jj = 0; jj < kMoeMaxTopK; ++jj)
    if (jj < k) {
      const float w = wt[ord[jj]];
      acc[0] += w * v[jj].x, acc[1] += w * v[jj].y, acc[2] += w * v[jj].z, acc[3] += w * v[jj].w;
    }
#pragma unroll
  for (int c = 0; c < 4; ++c) out[t * H + i + c] = from_f<O>(acc[c]);
}

// The workspace: t_expert-sorted order / slot_of [n], start [E + 1], tiles [2 max_tiles], n_tiles,
// gate_up [n, 2F] act, h [n, F] act, y [n, H] fp32 (gate_up and y by assignment on the GEMV
// path, by slot on the GEMM path; h only on the GEMM path).
struct Workspace {
  int32_t *order, *slot_of, *start, *tiles, *n_tiles;
  void *gate_up, *h;
  float* y;
  size_t bytes;
};
Workspace carve(void* base, int tokens, int top_k, int experts, int hidden, int ffn) {
  const size_t n = size_t(tokens) * size_t(top_k);
  auto up = [](size_t b) { return (b + 255) / 256 * 256; };
  const uintptr_t b0 = reinterpret_cast<uintptr_t>(base);
  uintptr_t p = b0;
  Workspace w{};
  auto take = [&](size_t b) {
    auto* r = reinterpret_cast<uint8_t*>(p);
    p += up(b);
    return r;
  };
  w.order = reinterpret_cast<int32_t*>(take(n * 4));
  w.slot_of = reinterpret_cast<int32_t*>(take(n * 4));
  w.start = reinterpret_cast<int32_t*>(take(size_t(experts + 1) * 4));
  w.tiles = reinterpret_cast<int32_t*>(take(size_t(moe::max_tiles(int(n), experts)) * 8));
  w.n_tiles = reinterpret_cast<int32_t*>(take(4));
  w.gate_up = take(n * size_t(2 * ffn) * 2);
  w.h = take(n * size_t(ffn) * 2);
  w.y = reinterpret_cast<float*>(take(n * size_t(hidden) * 4));
  w.bytes = size_t(p - b0);
  return w;
}

// Calls f with std::integral_constant<int, KIND> for a MoeWeights::kind (checked already).
template <typename F>
cudaError_t by_kind(int kind, F&& f) {
  if (kind == kInt8) return f(std::integral_constant<int, kInt8>{});
  if (kind == kInt4) return f(std::integral_constant<int, kInt4>{});
  if (kind == kFp8) return f(std::integral_constant<int, kFp8>{});
  return f(std::integral_constant<int, moe::k16Bit>{});
}

// How the kernels read a stacked matrix with rows of K weights.
moe::Rows rows_of(const MoeWeights& w, int K) {
  if (w.kind == moe::k16Bit) return {static_cast<const uint8_t*>(w.data), size_t(K) * 2, 31};
  const GqFormat f{GqKind(w.kind), w.group};
  return {static_cast<const uint8_t*>(w.data), f.row_bytes(K), group_shift(w.group)};
}

// Whether the kernels take a matrix of this format with rows of K weights: 16-bit (K % 8 == 0),
// or int8 / fp8 / int4 GQ rows whose groups hold whole 16-byte loads of codes (K % 32 == 0).
bool weights_ok(const MoeWeights& w, int K) {
  if (w.kind == moe::k16Bit) return K % 8 == 0;
  if (w.kind != kInt8 && w.kind != kInt4 && w.kind != kFp8) return false;
  const int gshift = group_shift(w.group);
  return K % 32 == 0 && gshift >= 0 && (w.group == 0 || (w.group >= (w.kind == kInt4 ? 32 : 16) && K % w.group == 0));
}

template <typename T>
cudaError_t experts_typed(const MoeArgs& a, cudaStream_t s) {
  const int n = a.tokens * a.top_k, F2 = 2 * a.ffn;
  const Workspace w = carve(a.workspace, a.tokens, a.top_k, a.experts, a.hidden, a.ffn);
  const T* x = static_cast<const T*>(a.x);
  const moe::Rows wgu = rows_of(a.gate_up, a.hidden), wd = rows_of(a.down, a.ffn);
  T* gu = static_cast<T*>(w.gate_up);
  const int32_t* slot_of = nullptr;
  // Default: 4 assignments an expert for 16-bit rows; 1 for quantised ones, whose GEMV pays a
  // dequantise per weight that the GEMM's shared-memory tiles amortise (H100, Qwen3-30B-A3B int8:
  // GEMM 24.5 ms against GEMV 40.7 ms at batch 64, GEMV 10.4 against 12.2 ms at batch 8; int4,
  // grouped int8 and fp8 take int8's threshold, not measured: fp8's GEMV also reads a byte a
  // weight and pays a convert and an FMA a pair, about int8's dequantise).
  const bool quantized = a.gate_up.kind != moe::k16Bit || a.down.kind != moe::k16Bit;
  const int per_expert = quantized ? 1 : 4;
  const int gemv_max = std::min(a.gemv_max_assign < 0 ? per_expert * a.experts : a.gemv_max_assign, moe::kGemvMaxAssign);
  if (n <= gemv_max) {
    if (cudaError_t e = by_kind(a.gate_up.kind,
                                [&](auto k) {
                                  return moe::gemv<T, decltype(k)::value, T>(wgu, F2, a.hidden, x, false, a.top_k,
                                                                             a.t_expert, n, a.experts, gu, s, a.gemv);
                                });
        e != cudaSuccess)
      return e;
    if (cudaError_t e = by_kind(a.down.kind,
                                [&](auto k) {
                                  return moe::gemv<T, decltype(k)::value, float>(wd, a.hidden, a.ffn, gu, true,
                                                                                 a.top_k, a.t_expert, n, a.experts,
                                                                                 w.y, s, a.gemv);
                                });
        e != cudaSuccess)
      return e;
  } else {
    moe_sort_kernel<<<1, 1024, 0, s>>>(a.t_expert, n, a.experts, w.start, w.order, w.slot_of, w.tiles, w.n_tiles);
    const int tiles = moe::max_tiles(n, a.experts);
    if (cudaError_t e = by_kind(a.gate_up.kind,
                                [&](auto k) {
                                  return moe::gemm<T, decltype(k)::value, T>(wgu, F2, a.hidden, x, w.order, a.top_k,
                                                                             w.tiles, w.n_tiles, w.start, tiles, gu,
                                                                             s);
                                });
        e != cudaSuccess)
      return e;
    if (cudaError_t e = swiglu(a.act, gu, w.h, n, a.ffn, s, GqX{nullptr}); e != cudaSuccess) return e;
    if (cudaError_t e = by_kind(a.down.kind,
                                [&](auto k) {
                                  return moe::gemm<T, decltype(k)::value, float>(
                                      wd, a.hidden, a.ffn, static_cast<const T*>(w.h), nullptr, a.top_k, w.tiles,
                                      w.n_tiles, w.start, tiles, w.y, s);
                                });
        e != cudaSuccess)
      return e;
    slot_of = w.slot_of;
  }
  const dim3 combine_grid(unsigned(a.tokens), ceil_div(a.hidden, 256 * 4));
  const bool pdl = a.gemv.pdl && !slot_of;  // after the down GEMV (the GEMM path launches plainly)
  if (a.out_f32)
    return launch_pdl(pdl, moe_combine_kernel<float>, combine_grid, dim3(256), 0, s, w.y, a.hidden, a.t_expert,
                      a.t_weight, slot_of, a.top_k, static_cast<float*>(a.out));
  return launch_pdl(pdl, moe_combine_kernel<T>, combine_grid, dim3(256), 0, s, w.y, a.hidden, a.t_expert, a.t_weight,
                    slot_of, a.top_k, static_cast<T*>(a.out));
}

}  // namespace

cudaError_t moe_route(Act act, const void* logits, int tokens, int experts, int top_k, bool norm_topk_prob,
                      int32_t* t_expert, float* t_weight, cudaStream_t s, bool pdl) {
  if (experts < 1 || experts > kMoeMaxExperts || top_k < 1 || top_k > experts || top_k > kMoeMaxTopK)
    return cudaErrorInvalidValue;
  if (tokens == 0) return cudaSuccess;
  const dim3 grid(ceil_div(int64_t(tokens) * 32, 256));
  if (act == Act::BF16)
    return launch_pdl(pdl, moe_route_kernel<__nv_bfloat16>, grid, dim3(256), 0, s,
                      static_cast<const __nv_bfloat16*>(logits), tokens, experts, top_k, norm_topk_prob, t_expert,
                      t_weight);
  return launch_pdl(pdl, moe_route_kernel<__half>, grid, dim3(256), 0, s, static_cast<const __half*>(logits), tokens,
                    experts, top_k, norm_topk_prob, t_expert, t_weight);
}

cudaError_t moe_experts(const MoeArgs& a, cudaStream_t s) {
  if (a.experts < 1 || a.experts > kMoeMaxExperts || a.top_k < 1 || a.top_k > kMoeMaxTopK || a.hidden % 8 != 0 ||
      a.ffn % 8 != 0 || !weights_ok(a.gate_up, a.hidden) || !weights_ok(a.down, a.ffn))
    return cudaErrorInvalidValue;
  if (a.tokens == 0) return cudaSuccess;
  return a.act == Act::BF16 ? experts_typed<__nv_bfloat16>(a, s) : experts_typed<__half>(a, s);
}

size_t moe_workspace_bytes(int tokens, int top_k, int experts, int hidden, int ffn) {
  return carve(nullptr, tokens, top_k, experts, hidden, ffn).bytes;
}

}  // namespace lite_llama::cuda
