// Decode-time projection for up to 8 tokens: each warp streams weight rows with 16-byte
// non-allocating loads and multiplies them with every token's activations, so the weights are
// read exactly once per step. Bandwidth-bound by design (cuBLAS handles larger batches).
#include <algorithm>
#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kWarps = 8;

// Each warp computes R rows for all NT tokens; per iteration a lane keeps R*U weight loads of
// 16 bytes in flight and loads each activation chunk once for all R rows (activation loads
// would otherwise outnumber weight loads NT to 1 and make the kernel issue-bound).
template <typename T, int NT, int R, int U, typename OutT>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                           const T* __restrict__ bias, OutT* __restrict__ out,
                                                           int N, int K, int ldo) {
  const int lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * R;
  if (row0 >= N) return;
  const int chunks = K / 8;
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
  for (int c0 = lane; c0 < chunks; c0 += 32 * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * 32;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[u][r] = (c < chunks && row0 + r < N) ? ld_stream(w + size_t(row0 + r) * K + size_t(c) * 8)
                                                : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * 32;
      if (c >= chunks) break;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float xf[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(x + size_t(t) * K + size_t(c) * 8), xf);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float wf[8];
          unpack8<T>(wv[u][r], wf);
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r][t] = fmaf(wf[j], xf[j], acc[r][t]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (row0 + r >= N) break;
      const float b = bias ? to_f(bias[row0 + r]) : 0.f;
#pragma unroll
      for (int t = 0; t < NT; ++t) out[size_t(t) * ldo + row0 + r] = from_f<OutT>(acc[r][t] + b);
    }
  }
}

// One to kGemv1MaxTokens tokens, K a multiple of 64: a block of 8 warps computes 4 rows, each warp
// one eighth of K, and the warps' partial sums meet in shared memory. Small matrices (N = 2048)
// then still give every SM many resident warps, which a warp-per-row layout cannot. Each weight
// chunk is unpacked once and multiplied with every token's activations.
constexpr int kRows1 = 4;

// What the GEMV computes around the product: kPlain out = x W^T; kSwigluIn: x is
// [gate (K) | up (K)] and the input is silu(gate) * up rounded to T (swiglu_kernel's formula),
// recomputed by every block from the L2-resident row: no separate SwiGLU launch; kSwigluOut: W is
// [gate (N rows) | up (N rows)], a block's rows are gate rows (i, i + 1) and up rows (i, i + 1), and
// out[i] = silu(gate) * up of the products rounded to T, as gemv then swiglu_kernel compute it;
// kRopeKv (one token): W is the QKV projection [Hq + 2 Hkv heads of D rows], a block's 4 rows are
// two RoPE pairs of one head, and the products rounded to T are rotated (q, k) and stored where
// rope_kv_kernel puts them (q_out, the K / V pool slot): no qkv buffer, no RoPE launch.
enum class Gemv1 { kPlain, kSwigluIn, kSwigluOut, kRopeKv };

// kRopeKv: the weight row of row group row0's r-th row (0..3). Neox pairs (i, i + D/2), so the
// group takes rows p, p + 1, p + D/2, p + D/2 + 1 of its head (p = (row0 % D) / 2); interleaved
// pairs (2i, 2i + 1) are adjacent: rows row0 .. row0 + 3.
__device__ __forceinline__ int rope_w_row(const RopeKvArgs& a, int row0, int r) {
  if (a.interleaved) return row0 + r;
  const int o = row0 % a.D;
  return row0 - o + o / 2 + (r & 1) + (r >> 1) * (a.D / 2);
}

// kLoop: the grid is smaller than the row groups (at most a few blocks an SM) and a block takes
// groups blockIdx.x, blockIdx.x + gridDim.x, ...; it requests the next group's first weights
// before the current group's sums meet, so a block's loads stay in flight across its groups and
// no block pays a launch, a PDL wait or a tail alone. Same sums in the same order: bitwise equal.
// kOrdered: the first weights, requested before pdl_wait(), use ordinary loads. The read-only
// loads (ld_stream) are free to move past the wait, and ptxas puts the wait (ACQBULK) first, so
// without it no weight is requested before the kernel before this one has finished (SASS of
// every variant, nvcc 13.0); ordinary loads keep their place.
// NT tokens: x rows of K (kSwigluIn: 2K), out rows ldo apart.
template <typename T, typename OutT, int NT, Gemv1 kMode = Gemv1::kPlain, bool kLoop = false, bool kOrdered = false>
__global__ void __launch_bounds__(kWarps * 32) gemv1_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                            const T* __restrict__ bias, OutT* __restrict__ out,
                                                            int N, int K, int ldo, RopeKvArgs rk) {
  constexpr bool kSwiglu = kMode == Gemv1::kSwigluIn, kGateUp = kMode == Gemv1::kSwigluOut;
  constexpr bool kRope = kMode == Gemv1::kRopeKv;
  static_assert(NT >= 1 && NT <= kGemv1MaxTokens && (NT == 1 || !kRope), "kRopeKv takes one token");
  constexpr int kOut = kGateUp ? kRows1 / 2 : kRows1;  // outputs a row group and token
  // A warp's sums over its K slice, [row * NT + token]; two tokens' 8 are reduced by halving steps
  // (warp_reduce_scatter).
  constexpr int kSums = kRows1 * NT;
  __shared__ float part[kWarps][kSums];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups = (N + kOut - 1) / kOut;
  const size_t xs = kSwiglu ? 2 * size_t(K) : size_t(K);  // x's row stride
  // The weight row of row group g's r-th row, and whether it exists.
  auto w_row = [&](int row0, int r) {
    if constexpr (kRope) return rope_w_row(rk, row0, r);
    return kGateUp ? row0 + (r & 1) + (r >> 1) * N : row0 + r;
  };
  auto row_ok = [&](int row0, int r) { return (kGateUp ? row0 + (r & 1) : row0 + r) < N; };
  const int slice = K / kWarps;  // elements per warp, a multiple of 8
  const int c_beg = warp * (slice / 8), c_end = c_beg + slice / 8;
  uint4 wv[2][kRows1];
  auto load_w = [&](int row0, int c0, auto ld) {
    const int c1 = c0 + 32;
#pragma unroll
    for (int r = 0; r < kRows1; ++r) {
      const bool ok = row_ok(row0, r) && c0 < c_end;
      wv[0][r] = ok ? ld(w + size_t(w_row(row0, r)) * K + size_t(c0) * 8) : make_uint4(0, 0, 0, 0);
      wv[1][r] = ok && c1 < c_end ? ld(w + size_t(w_row(row0, r)) * K + size_t(c1) * 8) : make_uint4(0, 0, 0, 0);
    }
  };
  auto streamed = [](const void* p) { return ld_stream(p); };
  auto first = [](const void* p) { return ld_stream<!kOrdered>(p); };
  int grp = blockIdx.x;
  // Launched with PDL (LITE_LLAMA_PDL_GEMV=1) this block may start while the kernel before it
  // (norm, SwiGLU, attention merge) still runs: the first weights, which no kernel writes, are
  // fetched before the wait; x and out only after it.
  load_w(grp * kOut, c_beg + lane, first);
  // kRopeKv: the token's position and slot (uploaded before the step) and the cos/sin row, which
  // no kernel writes, before the wait too; threads 0 and 1 rotate a pair each.
  int slot = 0;
  const float* cs = nullptr;
  if constexpr (kRope) {
    if (threadIdx.x < 2) {
      slot = rk.slots[0];
      cs = rk.cos_sin + size_t(rk.positions[0]) * rk.rot_dim;
    }
  }
  pdl_wait();
  for (;;) {
    const int row0 = grp * kOut;
    float acc[kRows1][NT];
#pragma unroll
    for (int r = 0; r < kRows1; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
    for (int c0 = c_beg + lane; c0 < c_end; c0 += 64) {
      const int c1 = c0 + 32;
      if (c0 != c_beg + lane) load_w(row0, c0, streamed);
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int c = u ? c1 : c0;
        if (c >= c_end) break;
        float xf[NT][8];
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const T* xt = x + size_t(t) * xs;
          if constexpr (kSwiglu) {
            float gf[8], uf[8];
            unpack8<T>(*reinterpret_cast<const uint4*>(xt + size_t(c) * 8), gf);
            unpack8<T>(*reinterpret_cast<const uint4*>(xt + size_t(K) + size_t(c) * 8), uf);
#pragma unroll
            for (int j = 0; j < 8; ++j) gf[j] = gf[j] / (1.0f + __expf(-gf[j])) * uf[j];
            unpack8<T>(pack8<T>(gf), xf[t]);
          } else {
            unpack8<T>(*reinterpret_cast<const uint4*>(xt + size_t(c) * 8), xf[t]);
          }
        }
#pragma unroll
        for (int r = 0; r < kRows1; ++r) {
          float wf[8];
          unpack8<T>(wv[u][r], wf);
#pragma unroll
          for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[r][t] = fmaf(wf[j], xf[t][j], acc[r][t]);
        }
      }
    }
    const int next = kLoop ? grp + int(gridDim.x) : groups;
    if (next < groups)
      load_w(next * kOut, c_beg + lane, streamed);  // in flight while this group's sums meet
    else
      pdl_trigger();  // the norm or RoPE + KV write after it (PDL) may be scheduled; it waits inside
    if constexpr (NT == 1) {  // (halving steps measured no faster for one token's 4 sums)
#pragma unroll
      for (int r = 0; r < kRows1; ++r) {
        const float v = warp_sum(acc[r][0]);
        if (lane == 0) part[warp][r] = v;
      }
    } else {
      float v[kSums];
#pragma unroll
      for (int i = 0; i < kSums; ++i) v[i] = acc[i / NT][i % NT];
      const float sum = warp_reduce_scatter<kSums>(v, lane);
      if (lane % (32 / kSums) == 0) part[warp][lane / (32 / kSums)] = sum;
    }
    __syncthreads();
    // Thread i < kOut * NT finishes output row i % kOut of token i / kOut.
    const int r = int(threadIdx.x) % kOut, t = int(threadIdx.x) / kOut;
    if constexpr (kGateUp) {
      if (t < NT && row0 + r < N) {
        float g = 0.f, u = 0.f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) g += part[i][r * NT + t], u += part[i][(r + 2) * NT + t];
        if (bias) g += to_f(bias[row0 + r]), u += to_f(bias[N + row0 + r]);
        g = to_f(from_f<T>(g)), u = to_f(from_f<T>(u));  // the gate|up row gemv would have stored
        out[size_t(t) * ldo + row0 + r] = from_f<OutT>(g / (1.0f + __expf(-g)) * u);
      }
    } else if constexpr (kRope) {
      if (threadIdx.x < 2) {
        // The products rounded to T (what the QKV GEMV stores), rotated as rope_kv_kernel rotates.
        auto product = [&](int r) {
          float v = 0.f;
#pragma unroll
          for (int i = 0; i < kWarps; ++i) v += part[i][r];
          if (bias) v += to_f(bias[w_row(row0, r)]);
          return to_f(from_f<T>(v));
        };
        const int j = threadIdx.x, ra = rk.interleaved ? 2 * j : j, rb = rk.interleaved ? 2 * j + 1 : j + 2;
        const int D = rk.D, head = row0 / D, ia = w_row(row0, ra) - head * D, ib = w_row(row0, rb) - head * D;
        float y0 = product(ra), y1 = product(rb);
        T* dst;
        if (head < rk.Hq) {
          dst = static_cast<T*>(rk.q_out) + size_t(head) * D;
        } else {
          const int kv = head - rk.Hq, v = kv >= rk.Hkv;
          dst = static_cast<T*>(v ? rk.v_pool : rk.k_pool) + (size_t(slot) * rk.Hkv + (kv - v * rk.Hkv)) * D;
        }
        if (head < rk.Hq + rk.Hkv) {
          const int i = rk.interleaved ? ia / 2 : ia;
          rope_rotate(y0, y1, cs[i], cs[D / 2 + i], y0, y1);
        }
        dst[ia] = from_f<T>(y0);
        dst[ib] = from_f<T>(y1);
      }
    } else if (t < NT && row0 + r < N) {
      float v = 0.f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) v += part[i][r * NT + t];
      if (bias) v += to_f(bias[row0 + r]);
      out[size_t(t) * ldo + row0 + r] = from_f<OutT>(v);
    }
    if (next >= groups) break;
    __syncthreads();  // part is rewritten by the next group
    grp = next;
  }
}

// gemv1_kernel's K: a whole number of 8-element chunks for each of its warps.
bool gemv1_fits(int K) { return K % (kWarps * 8) == 0; }

// One launch of gemv1_kernel for NT tokens of N outputs (kSwigluOut: a block writes 2 of them,
// else 4), on at most opt.max_blocks looping blocks where that is fewer than the row groups (0: a
// block each).
template <typename T, typename OutT, Gemv1 kMode, int NT>
cudaError_t launch_gemv1_nt(const void* x, const void* w, const void* bias, void* out, int N, int K, int ldo,
                            cudaStream_t s, bool pdl, Gemv1Options opt, const RopeKvArgs& rk) {
  constexpr int kOutPerBlock = kMode == Gemv1::kSwigluOut ? kRows1 / 2 : kRows1;
  const int groups = int(ceil_div(N, kOutPerBlock));
  auto go = [&](auto kernel, int blocks) {
    return launch_pdl(pdl, kernel, dim3(blocks), dim3(kWarps * 32), 0, s, static_cast<const T*>(x),
                      static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<OutT*>(out), N, K, ldo,
                      rk);
  };
  auto with_loop = [&](auto ordered) {
    constexpr bool kOrdered = decltype(ordered)::value;
    auto* looping = gemv1_kernel<T, OutT, NT, kMode, true, kOrdered>;
    int max_blocks = opt.max_blocks;
    if (max_blocks > 0 && opt.num_sms > 0) {
      // Looping blocks must all be resident: more registers hold fewer an SM.
      static const int per_sm = [&] {
        int n = 0;
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, looping, kWarps * 32, 0) == cudaSuccess ? n : 0;
      }();
      if (per_sm > 0) max_blocks = std::min(max_blocks, per_sm * opt.num_sms);
    }
    if (NT == 1 && opt.balanced && max_blocks > 0 && max_blocks < groups) {
      // 768 groups on 528 blocks: 240 blocks take two and 288 one; on 384 blocks all take two.
      const int rounds = (groups + max_blocks - 1) / max_blocks;
      max_blocks = (groups + rounds - 1) / rounds;
    }
    return max_blocks > 0 && max_blocks < groups ? go(looping, max_blocks)
                                                 : go(gemv1_kernel<T, OutT, NT, kMode, false, kOrdered>, groups);
  };
  return opt.ordered_prefetch ? with_loop(std::true_type{}) : with_loop(std::false_type{});
}

template <typename T, typename OutT, Gemv1 kMode>
cudaError_t launch_gemv1(const void* x, const void* w, const void* bias, void* out, int nt, int N, int K, int ldo,
                         cudaStream_t s, bool pdl, Gemv1Options opt, const RopeKvArgs& rk = {}) {
  if constexpr (kMode == Gemv1::kRopeKv) {
    if (nt != 1) return cudaErrorInvalidValue;
    return launch_gemv1_nt<T, OutT, kMode, 1>(x, w, bias, out, N, K, ldo, s, pdl, opt, rk);
  } else {
    static_assert(kGemv1MaxTokens == 2, "one case a token count");
    if (nt == 1) return launch_gemv1_nt<T, OutT, kMode, 1>(x, w, bias, out, N, K, ldo, s, pdl, opt, rk);
    if (nt == 2) return launch_gemv1_nt<T, OutT, kMode, 2>(x, w, bias, out, N, K, ldo, s, pdl, opt, rk);
    return cudaErrorInvalidValue;
  }
}

template <typename T, typename OutT>
cudaError_t launch(const void* x, const void* w, const void* bias, void* out, int T_, int N, int K,
                   int ldo, cudaStream_t s, bool pdl, Gemv1Options opt) {
  auto* xp = static_cast<const T*>(x);
  auto* wp = static_cast<const T*>(w);
  auto* bp = static_cast<const T*>(bias);
  auto* op = static_cast<OutT*>(out);
  const dim3 block(kWarps * 32);
  // Up to kGemv1MaxTokens tokens, K % 64 == 0: gemv1_kernel. Else one token: 2 rows x 4 chunks in
  // flight per lane; more tokens: 4 rows share each x load.
  if (T_ <= kGemv1MaxTokens && gemv1_fits(K))
    return launch_gemv1<T, OutT, Gemv1::kPlain>(x, w, bias, out, T_, N, K, ldo, s, pdl, opt);
  if (T_ == 1) {
    gemv_kernel<T, 1, 2, 4, OutT><<<ceil_div(N, kWarps * 2), block, 0, s>>>(xp, wp, bp, op, N, K, ldo);
    return cudaGetLastError();
  }
  const dim3 grid(ceil_div(N, kWarps * 4));
  switch (T_) {
#define LL_CASE(n) \
  case n: gemv_kernel<T, n, 4, 2, OutT><<<grid, block, 0, s>>>(xp, wp, bp, op, N, K, ldo); break;
    LL_CASE(2) LL_CASE(3) LL_CASE(4) LL_CASE(5) LL_CASE(6) LL_CASE(7) LL_CASE(8)
#undef LL_CASE
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

// Every block recomputes the K SwiGLU inputs: worth one launch up to K = 8192 (H100, batch-1
// decode: Llama-3.2-1B's K 8192 +2.0%, Llama-3.1-8B's 14336 -1.0%, against the two kernels).
bool gemv_swiglu_fits(int K) { return K > 0 && K <= 8192 && gemv1_fits(K); }

cudaError_t gemv_swiglu(Act act, const void* gate_up, const void* w, const void* bias, void* out, bool out_f32,
                        int T, int N, int K, cudaStream_t s, bool pdl, Gemv1Options opt) {
  if (!gemv_swiglu_fits(K) || T < 1 || T > kGemv1MaxTokens) return cudaErrorInvalidValue;
  auto go = [&](auto t, auto o) {
    return launch_gemv1<decltype(t), decltype(o), Gemv1::kSwigluIn>(gate_up, w, bias, out, T, N, K, N, s, pdl, opt);
  };
  if (act == Act::BF16) return out_f32 ? go(__nv_bfloat16{}, float{}) : go(__nv_bfloat16{}, __nv_bfloat16{});
  return out_f32 ? go(__half{}, float{}) : go(__half{}, __half{});
}

bool gemv_gate_up_swiglu_fits(int F, int K) { return F > 0 && F % 2 == 0 && K > 0 && gemv1_fits(K); }

cudaError_t gemv_gate_up_swiglu(Act act, const void* x, const void* w, const void* bias, void* out, int T, int F,
                                int K, cudaStream_t s, bool pdl, Gemv1Options opt) {
  if (!gemv_gate_up_swiglu_fits(F, K) || T < 1 || T > kGemv1MaxTokens) return cudaErrorInvalidValue;
  auto go = [&](auto t) {
    return launch_gemv1<decltype(t), decltype(t), Gemv1::kSwigluOut>(x, w, bias, out, T, F, K, F, s, pdl, opt);
  };
  return act == Act::BF16 ? go(__nv_bfloat16{}) : go(__half{});
}

bool gemv_rope_store_fits(const RopeKvArgs& a, int K) {
  return a.T == 1 && a.rot_dim == a.D && a.D % 4 == 0 && !a.q_norm && !a.k_norm && gemv1_fits(K);
}

cudaError_t gemv_rope_store(Act act, const void* x, const void* w, const void* bias, const RopeKvArgs& a, int K,
                            cudaStream_t s, bool pdl, Gemv1Options opt) {
  if (!gemv_rope_store_fits(a, K)) return cudaErrorInvalidValue;
  const int N = (a.Hq + 2 * a.Hkv) * a.D;
  auto go = [&](auto t) {
    return launch_gemv1<decltype(t), decltype(t), Gemv1::kRopeKv>(x, w, bias, nullptr, 1, N, K, N, s, pdl, opt, a);
  };
  return act == Act::BF16 ? go(__nv_bfloat16{}) : go(__half{});
}

cudaError_t gemv(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32,
                 int T, int N, int K, int ldo, cudaStream_t s, bool pdl, Gemv1Options opt) {
  if (K % 8 != 0 || T < 1 || T > 8) return cudaErrorInvalidValue;
  if (act == Act::BF16)
    return out_f32 ? launch<__nv_bfloat16, float>(x, w, bias, out, T, N, K, ldo, s, pdl, opt)
                   : launch<__nv_bfloat16, __nv_bfloat16>(x, w, bias, out, T, N, K, ldo, s, pdl, opt);
  return out_f32 ? launch<__half, float>(x, w, bias, out, T, N, K, ldo, s, pdl, opt)
                 : launch<__half, __half>(x, w, bias, out, T, N, K, ldo, s, pdl, opt);
}

}  // namespace lite_llama::cuda
