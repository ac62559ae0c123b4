// Projections of 2-16 tokens of 16-bit weights on tensor cores (mma.sync m16n8k16, fp32 sums),
// laid out for bandwidth as the one-token GEMV is: a block takes 8 weight rows (the MMA's 8
// columns, so N = 2,048 gives 256 blocks, about two an SM) and its 8 warps split K; every lane
// requests all U of its 16-byte weight chunks of an iteration before any math, so at K = 2,048 a
// warp's whole slice is in flight at once. The tokens are the MMA's 16 A rows (rows past T are
// zeros and not loaded). The 8 warps' sums meet in shared memory in a fixed order.
//
// Keys are permuted alike on both sides, so no shuffle or staging is needed: lane 4 g + t loads 8
// consecutive keys of weight row g and of token g (and g + 8), k0 + 8 t .. k0 + 8 t + 7; keys 0-3
// of those 8 are the MMA keys 2t, 2t + 1, 2t + 8, 2t + 9 of one k16 step and keys 4-7 those of
// the next (mma.cuh's fragment layout).
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/mma.cuh"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRows = 8;  // weight rows a block: the MMA's n
constexpr int kU = 8;     // 32-key groups a lane has in flight (one weight load each)

// kWide: T > 8, token rows 8-15 are loaded too.
template <typename T, typename OutT, bool kWide>
__global__ void __launch_bounds__(kThreads) gemv_tc_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                          const T* __restrict__ bias, OutT* __restrict__ out,
                                                          int ntok, int N, int K, int ldo) {
  __shared__ float part[kWarps][kRows][16 + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * kRows;
  const bool w_ok = n0 + g < N, xa_ok = g < ntok, xb_ok = kWide && g + 8 < ntok;
  const T* wr = w + size_t(w_ok ? n0 + g : 0) * K + 8 * t;
  const T* xa = x + size_t(xa_ok ? g : 0) * K + 8 * t;
  const T* xb = x + size_t(xb_ok ? g + 8 : 0) * K + 8 * t;
  const int groups = (K + 31) / 32, per = (groups + kWarps - 1) / kWarps;
  const int g_beg = warp * per, g_end = min(groups, g_beg + per);
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // A group's 8 keys of this lane are all inside K or all outside (K % 8 == 0).
  auto in = [&](int grp) { return grp < g_end && grp * 32 + 8 * t < K; };
  uint4 wv[kU];
  auto load_w = [&](int gb) {
#pragma unroll
    for (int u = 0; u < kU; ++u) wv[u] = in(gb + u) && w_ok ? ld_stream(wr + size_t(gb + u) * 32) : zero;
  };
  // Weights, which no kernel writes, are requested before the PDL wait; the tokens after it.
  load_w(g_beg);
  pdl_wait();
  float acc[2][4] = {};
  for (int gb = g_beg; gb < g_end; gb += kU) {
    if (gb != g_beg) load_w(gb);
    // All of the iteration's token chunks are requested before the first MMA waits on one.
    uint4 xav[kU], xbv[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const bool ok = in(gb + u);
      xav[u] = ok && xa_ok ? __ldg(reinterpret_cast<const uint4*>(xa + size_t(gb + u) * 32)) : zero;
      xbv[u] = kWide && ok && xb_ok ? __ldg(reinterpret_cast<const uint4*>(xb + size_t(gb + u) * 32)) : zero;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      // Past the slice every operand is zero: the MMAs add nothing, and control stays uniform.
      const uint4 a = xav[u], b = xbv[u];
      const uint32_t lo[4] = {a.x, b.x, a.y, b.y}, hi[4] = {a.z, b.z, a.w, b.w};
      mma16816<T>(acc[u & 1], lo, wv[u].x, wv[u].y);
      mma16816<T>(acc[u & 1], hi, wv[u].z, wv[u].w);
    }
  }
  pdl_trigger();
  // C: c0, c1 token g, weight rows 2t, 2t + 1; c2, c3 token g + 8.
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    part[warp][2 * t + j][g] = acc[0][j] + acc[1][j];
    if (kWide) part[warp][2 * t + j][g + 8] = acc[0][2 + j] + acc[1][2 + j];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * 16; i += kThreads) {
    const int r = i % kRows, tk = i / kRows, n = n0 + r;
    if (tk >= ntok || n >= N) continue;
    float v = 0.f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) v += part[k][r][tk];
    if (bias) v += to_f(bias[n]);
    out[size_t(tk) * ldo + n] = from_f<OutT>(v);
  }
}

template <typename T, typename OutT>
cudaError_t launch(const void* x, const void* w, const void* bias, void* out, int T_, int N, int K, int ldo,
                   cudaStream_t s, bool pdl) {
  const dim3 grid(ceil_div(N, kRows)), block(kThreads);
  auto go = [&](auto kernel) {
    return launch_pdl(pdl, kernel, grid, block, 0, s, static_cast<const T*>(x), static_cast<const T*>(w),
                      static_cast<const T*>(bias), static_cast<OutT*>(out), T_, N, K, ldo);
  };
  return T_ <= 8 ? go(gemv_tc_kernel<T, OutT, false>) : go(gemv_tc_kernel<T, OutT, true>);
}

}  // namespace

cudaError_t gemv_tc(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32, int T, int N,
                    int K, int ldo, cudaStream_t s, bool pdl) {
  if (K % 8 != 0 || K < 8 || T < 1 || T > kGemvTcMaxTokens || N < 1) return cudaErrorInvalidValue;
  if (act == Act::BF16)
    return out_f32 ? launch<__nv_bfloat16, float>(x, w, bias, out, T, N, K, ldo, s, pdl)
                   : launch<__nv_bfloat16, __nv_bfloat16>(x, w, bias, out, T, N, K, ldo, s, pdl);
  return out_f32 ? launch<__half, float>(x, w, bias, out, T, N, K, ldo, s, pdl)
                 : launch<__half, __half>(x, w, bias, out, T, N, K, ldo, s, pdl);
}

}  // namespace lite_llama::cuda
