// Decode GEMV (T <= 8 tokens) of int8 / int4 GQ weights (core/gq.h) with 16-bit activations: the
// dp4a GEMV's memory structure (gq.cu: 16-byte streaming code loads, all of a lane's loads issued
// before any math, several warps per row group, a shared-memory sum over them), but the codes are
// dequantised in registers straight into mma.sync m16n8k16 A fragments and multiplied by the
// activations as they are (B, tokens padded to 8), with fp32 accumulation. CUDA-core fp32 math
// costs ~1 FMA per weight and token (plus conversions), which makes the GEMV issue-bound from 2-3
// tokens; the tensor core does all 8 token columns in one instruction per 256 weights, so the
// cost is the dequantise alone (3 instructions per weight pair), whatever T.
//
// mma only needs A and B to agree on the order of k: lane 4 g + t of a warp owns rows g and g + 8
// of the warp's 16 and whole 16-byte chunks of codes (chunk c0 + t, c0 + 4 + t, ...); the k-step
// j of a chunk takes its weights 4 j .. 4 j + 3 (pairs 2 j, 2 j + 1), so B is the lane's token
// g activations of that chunk, words 2 j and 2 j + 1, and no shuffles are needed.
#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/gq_common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/mma.cuh"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;

// A block of 8 warps: 8 / wpr row groups of 16 rows, the wpr warps of a group splitting its
// chunks (small matrices still fill the GPU). Per iteration a lane issues its 2 x U 16-byte code
// loads (rows g, g + 8; chunks cb + t + 4 wpr u) before any math. Control flow stays warp-uniform
// (mma.sync): chunks past K and rows past N read zero codes and params (weight 0).
template <typename T, int KIND, int U, typename OutT>
__global__ void __launch_bounds__(kThreads, 2) gemv_gq16_kernel(const T* __restrict__ x, const uint8_t* __restrict__ w,
                                                             size_t rb, int gshift, const T* __restrict__ bias,
                                                             OutT* __restrict__ out, int T_, int N, int K, int ldo,
                                                             int wpr) {
  constexpr int V = kChunkVals<KIND>, XW = V / 8;  // XW: 16-byte activation loads per chunk and token
  __shared__ float part[kWarps][32][4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int row0 = (blockIdx.x * (kWarps / wpr) + warp / wpr) * 16;
  const int sub = warp % wpr;
  const int chunks = K / V, stride = 4 * wpr;
  const size_t qb = KIND == kInt4 ? size_t(K) / 2 : size_t(K);
  const uint8_t* wr[2] = {w + size_t(row0 + g) * rb, w + size_t(row0 + g + 8) * rb};
  const bool rok[2] = {row0 + g < N, row0 + g + 8 < N};
  const bool tok = g < T_;
  const T* xt = x + size_t(tok ? g : 0) * K;
  float acc[U][4];
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[u][i] = 0.f;
  pdl_wait();  // as the dp4a GEMV: loads before it kept too many registers live
  const int cend = row0 < N ? chunks : 0;  // a group wholly past N skips the loop (warp-uniform)
  for (int cb = 4 * sub; cb < cend; cb += stride * U) {
    uint4 q[U][2];
    uint32_t sm[U][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = cb + stride * u + t;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const bool ok = c < chunks && rok[r];
        q[u][r] = ok ? ld_stream(wr[r] + size_t(c) * 16) : make_uint4(0, 0, 0, 0);
        sm[u][r] = ok ? __ldg(reinterpret_cast<const uint32_t*>(wr[r] + qb) + ((c * V) >> gshift)) : 0u;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (cb + stride * u >= chunks) break;  // warp-uniform
      const int c = cb + stride * u + t;
      uint32_t xv[4 * XW];
      const bool xok = tok && c < chunks;
#pragma unroll
      for (int h = 0; h < XW; ++h) {
        const uint4 a = xok ? __ldg(reinterpret_cast<const uint4*>(xt + size_t(c) * V) + h) : make_uint4(0, 0, 0, 0);
        xv[4 * h] = a.x, xv[4 * h + 1] = a.y, xv[4 * h + 2] = a.z, xv[4 * h + 3] = a.w;
      }
      const Params p0 = prep_params<T, KIND>(sm[u][0]), p1 = prep_params<T, KIND>(sm[u][1]);
#pragma unroll
      for (int j = 0; j < V / 4; ++j) {
        // a0: row g, k 4j..4j+1; a1: row g + 8; a2, a3: k 4j+2..4j+3 (mma.cuh).
        const uint32_t a[4] = {dequant_pair<T, KIND>(q[u][0], 2 * j, p0), dequant_pair<T, KIND>(q[u][1], 2 * j, p1),
                               dequant_pair<T, KIND>(q[u][0], 2 * j + 1, p0),
                               dequant_pair<T, KIND>(q[u][1], 2 * j + 1, p1)};
        mma16816<T>(acc[u], a, xv[2 * j], xv[2 * j + 1]);
      }
    }
  }
  float c[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    c[i] = 0.f;
#pragma unroll
    for (int u = 0; u < U; ++u) c[i] += acc[u][i];
  }
  if (wpr > 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) part[warp][lane][i] = c[i];
    __syncthreads();
    if (sub != 0) return;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      c[i] = part[warp][lane][i];
      for (int k = 1; k < wpr; ++k) c[i] += part[warp + k][lane][i];
    }
  }
  // C fragment: c[i] is row g + 8 (i >> 1) of the group, token 2t + (i & 1).
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = row0 + g + 8 * (i >> 1), tk = 2 * t + (i & 1);
    if (r >= N || tk >= T_) continue;
    const float b = bias ? to_f(bias[r]) : 0.f;
    out[size_t(tk) * ldo + r] = from_f<OutT>(c[i] + b);
  }
}

template <typename T, int KIND, typename OutT>
cudaError_t launch(const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out, int T_,
                   int N, int K, int ldo, cudaStream_t s) {
  constexpr int U = 4;
  static_assert(kWarps == 8, "gemv_warps_per_row assumes 8-warp blocks");
  const int wpr = gemv_warps_per_row(K / kChunkVals<KIND>, N, 4, 16, U, q.num_sms);  // 4 lanes a row, 16 rows a warp
  const dim3 grid(ceil_div(N, 16 * (kWarps / wpr))), block(kThreads);
  return launch_pdl(q.pdl, gemv_gq16_kernel<T, KIND, U, OutT>, grid, block, 0, s, static_cast<const T*>(x),
                    static_cast<const uint8_t*>(w), q.row_bytes, gshift, static_cast<const T*>(bias),
                    static_cast<OutT*>(out), T_, N, K, ldo, wpr);
}

template <typename T, int KIND>
cudaError_t by_out(const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out,
                   bool out_f32, int T_, int N, int K, int ldo, cudaStream_t s) {
  return out_f32 ? launch<T, KIND, float>(q, gshift, x, w, bias, out, T_, N, K, ldo, s)
                 : launch<T, KIND, T>(q, gshift, x, w, bias, out, T_, N, K, ldo, s);
}

template <typename T>
cudaError_t by_kind(const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out,
                    bool out_f32, int T_, int N, int K, int ldo, cudaStream_t s) {
  if (q.kind == kInt4) return by_out<T, kInt4>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, s);
  return by_out<T, kInt8>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, s);
}

}  // namespace

cudaError_t gemv_gq16(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                      bool out_f32, int T, int N, int K, int ldo, cudaStream_t s) {
  const int gshift = group_shift(q.group);
  // A chunk (16 int8 / 32 int4 weights) must lie in one group.
  const int min_group = q.kind == kInt4 ? 32 : 16;
  if (gshift < 0 || (q.group && q.group < min_group) || (q.kind != kInt4 && q.kind != kInt8) || T < 1 ||
      T > kGqGemvMaxTokens || K % 32 != 0 || q.num_sms < 1)
    return cudaErrorInvalidValue;
  if (act == Act::BF16) return by_kind<__nv_bfloat16>(q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, s);
  return by_kind<__half>(q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, s);
}

}  // namespace lite_llama::cuda
