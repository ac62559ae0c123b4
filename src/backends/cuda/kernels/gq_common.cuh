// Pieces shared by the quantised (GQ) kernels: the GEMVs / dequantiser (gq.cu, gq_int.cu), the tensor-core
// GEMV and GEMM (gq_gemv16.cu, gq_mma.cu) and the MoE experts' kernels (moe_gemv.cu, moe_gemm.cu).
#pragma once
#include <cuda_fp8.h>

#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/mma.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kInt8 = 0, kInt4 = 1, kFp8 = 2;  // GqArgs::kind (GqKind order)

template <int KIND>
constexpr int kChunkVals = KIND == kInt4 ? 32 : 16;  // weights per 16-byte chunk of codes

__host__ __device__ constexpr size_t gq_code_bytes(int kind, int K) {
  return kind == kInt4 ? size_t(K) / 2 : size_t(K);
}

// Issues the 16-byte code loads (and group-param loads) of chunks c0 + stride * u for R rows
// before any math, so a lane keeps R x U streaming loads in flight; out-of-range ones read 0.
template <int V, int R, int U>
__device__ __forceinline__ void load_code_chunks(const uint8_t* __restrict__ w, size_t rb, size_t qb, int gshift,
                                                 int row0, int N, int c0, int stride, int chunks,
                                                 uint4 (&q)[U][R], uint32_t (&sm)[U][R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + stride * u;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool ok = c < chunks && row0 + r < N;
      const uint8_t* row = w + size_t(row0 + r) * rb;
      q[u][r] = ok ? ld_stream(row + size_t(c) * 16) : make_uint4(0, 0, 0, 0);
      sm[u][r] = ok ? __ldg(reinterpret_cast<const uint32_t*>(row + qb) + ((c * V) >> gshift)) : 0u;
    }
  }
}

template <int R, int NT>
__device__ __forceinline__ void zero_acc(float (&acc)[R][NT]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
}

__device__ __forceinline__ __half2 as_half2(uint32_t v) {
  __half2 h;
  memcpy(&h, &v, 4);
  return h;
}

// Pair p (k 2p, 2p + 1) of a chunk as fp16 1024 + code bits (int4 nibbles; int8 bytes hold
// code + 128): the 0x6400 exponent trick, no int -> float conversion.
// (bf16 int4: 0x4300 | q, the bf16 128 + q.)
template <int KIND, uint32_t kExp = 0x64006400u>
__device__ __forceinline__ uint32_t code_bits(const uint4& q, int p) {
  const uint32_t v[4] = {q.x, q.y, q.z, q.w};
  if constexpr (KIND == kInt4) return ((v[p >> 2] >> (4 * (p & 3))) & 0x000F000Fu) | kExp;
  else return __byte_perm(v[p >> 1], 0x64646464u, (p & 1) ? 0x4342 : 0x4140);
}

// The group's (s, m) prepared for the pair math of act type T and KIND (see dequant_pair).
struct Params {
  uint32_t s2, m2;  // 16-bit pairs (fp16 paths, bf16 int4)
  float s, mo;      // fp32 (bf16 int8 and fp8)
};
template <typename T, int KIND>
__device__ __forceinline__ Params prep_params(uint32_t sm_bits) {
  Params p{};
  const __half2 sm = as_half2(sm_bits);
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 s2 = __low2half2(sm), m2 = __high2half2(sm);
    memcpy(&p.s2, &s2, 4), memcpy(&p.m2, &m2, 4);
  } else {
    const float2 f = __half22float2(sm);
    if constexpr (KIND == kInt4) {
      // Centred in bf16, as gq_mma.cu: w = (q - 8) s + (m + 8 s), so rounding s and the centre
      // to bf16 errs like rounding the weight itself.
      const __nv_bfloat162 s2 = __float2bfloat162_rn(f.x), m2 = __float2bfloat162_rn(fmaf(8.f, f.x, f.y));
      memcpy(&p.s2, &s2, 4), memcpy(&p.m2, &m2, 4);
    } else {
      // int8: 1024 (exponent) + 128 (code bias) folded in; fp8 codes convert to their values.
      p.s = f.x, p.mo = KIND == kFp8 ? f.y : fmaf(-1152.f, f.x, f.y);
    }
  }
  return p;
}

// One weight pair as the 16-bit A-fragment register of type T. fp16: the code is recovered
// exactly (hsub2) and s * q + m rounded once (hfma2). bf16 int4: 0x4300 | q is the bf16 128 + q;
// bf16 int8 (a byte does not fit a bf16 mantissa): fp32 math, one rounding. fp8 (bytes 2p, 2p + 1
// as int8's): e4m3 -> fp16 is exact, then the same single rounding of s * q + m.
template <typename T, int KIND>
__device__ __forceinline__ uint32_t dequant_pair(const uint4& q, int p, const Params& pr) {
  if constexpr (KIND == kFp8) {
    const uint32_t v[4] = {q.x, q.y, q.z, q.w};
    const __half2 c =
        __half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v[p >> 1] >> (16 * (p & 1))), __NV_E4M3));
    uint32_t r;
    if constexpr (std::is_same_v<T, __half>) {
      const __half2 w = __hfma2(c, as_half2(pr.s2), as_half2(pr.m2));
      memcpy(&r, &w, 4);
    } else {
      const float2 f = __half22float2(c);
      r = pack2<__nv_bfloat16>(fmaf(f.x, pr.s, pr.mo), fmaf(f.y, pr.s, pr.mo));
    }
    return r;
  }
  constexpr bool kBfInt4 = std::is_same_v<T, __nv_bfloat16> && KIND == kInt4;
  const uint32_t bits = code_bits<KIND, kBfInt4 ? 0x43004300u : 0x64006400u>(q, p);
  uint32_t r;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 w = __hfma2(__hsub2(as_half2(bits), __float2half2_rn(KIND == kInt4 ? 1024.f : 1152.f)),
                              as_half2(pr.s2), as_half2(pr.m2));
    memcpy(&r, &w, 4);
  } else if constexpr (KIND == kInt4) {
    __nv_bfloat162 h, s2, m2;
    memcpy(&h, &bits, 4), memcpy(&s2, &pr.s2, 4), memcpy(&m2, &pr.m2, 4);
    const __nv_bfloat162 w = __hfma2(__hsub2(h, __float2bfloat162_rn(136.f)), s2, m2);
    memcpy(&r, &w, 4);
  } else {
    const float2 c = __half22float2(as_half2(bits));
    r = pack2<__nv_bfloat16>(fmaf(c.x, pr.s, pr.mo), fmaf(c.y, pr.s, pr.mo));
  }
  return r;
}

// log2 of a group size (groups are powers of two), 31 for per channel ((k >> 31) == 0 for every
// k); -1 for any other size.
inline int group_shift(int group) {
  if (group == 0) return 31;
  int sh = 0;
  while ((1 << sh) < group) ++sh;
  return (1 << sh) == group ? sh : -1;
}

// Warps of an 8-warp block that share one row group of a decode GEMV (a power of two): enough
// that each lane has about `unroll` chunks of the row, and more while the grid would give the
// GPU fewer than ~4 blocks per SM (small projections: o_proj, k/v). `lanes`: lanes of a warp on
// one row; `rows`: rows one warp computes.
inline int gemv_warps_per_row(int chunks, int N, int lanes, int rows, int unroll, int num_sms) {
  constexpr int kBlockWarps = 8;
  int wpr = 1;
  while (wpr < kBlockWarps && chunks > wpr * lanes * unroll) wpr *= 2;
  while (wpr < kBlockWarps && int64_t(N) * wpr / (rows * kBlockWarps) < 4 * num_sms && chunks >= wpr * 2 * lanes)
    wpr *= 2;
  return wpr;
}

}  // namespace
}  // namespace lite_llama::cuda
