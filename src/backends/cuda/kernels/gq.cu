// Quantised (GQ, see core/gq.h) weights: the fp32-math decode GEMV (fp8's path; the integer one
// is gq_int.cu) that dequantises in registers straight from the packed codes, a row dequantiser
// (prefill GEMM tiles, embedding rows) and the on-device quantiser behind --quantize. Codes become fp16 pairs with the 0x6400 exponent trick
// (no int->float conversions), one fp16 FMA applies scale and offset, math is then fp32.
#include <cuda_fp8.h>

#include <cstdlib>
#include <string>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/gq_common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

// One 16-byte chunk of codes -> kChunkVals<KIND> weights (all in one group: s = low, m = high half).
template <int KIND>
__device__ __forceinline__ void dequant_chunk(const uint4& q, uint32_t sm_bits, float* wf) {
  const __half2 sm = as_half2(sm_bits);
  const __half2 s2 = __low2half2(sm), m2 = __high2half2(sm);
  const uint32_t v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (KIND == kInt8) {
      const __half2 off = __float2half2_rn(1152.f);  // 1024 (exponent) + 128 (code bias)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const uint32_t h = __byte_perm(v[j], 0x64646464u, p ? 0x4342 : 0x4140);
        const float2 f = __half22float2(__hfma2(__hsub2(as_half2(h), off), s2, m2));
        wf[4 * j + 2 * p] = f.x, wf[4 * j + 2 * p + 1] = f.y;
      }
    } else if constexpr (KIND == kInt4) {
      const __half2 off = __float2half2_rn(1024.f);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t h = ((v[j] >> (4 * i)) & 0x000F000Fu) | 0x64006400u;
        const float2 f = __half22float2(__hfma2(__hsub2(as_half2(h), off), s2, m2));
        wf[8 * j + 2 * i] = f.x, wf[8 * j + 2 * i + 1] = f.y;
      }
    } else {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const __half2_raw r =
            __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v[j] >> (16 * p)), __NV_E4M3);
        const float2 f = __half22float2(__hmul2(__half2(r), s2));
        wf[4 * j + 2 * p] = f.x, wf[4 * j + 2 * p + 1] = f.y;
      }
    }
  }
}

// Each warp computes R rows for NT tokens; per iteration a lane loads U chunks of every row
// (R * U streaming 16-byte loads in flight), dequantises them once and reuses them for all tokens.
template <typename T, int KIND, int NT, int R, int U, typename OutT>
__global__ void __launch_bounds__(256) gemv_gq_kernel(const T* __restrict__ x, const uint8_t* __restrict__ w,
                                                      size_t rb, int gshift, const T* __restrict__ bias,
                                                      OutT* __restrict__ out, int N, int K, int ldo) {
  constexpr int V = kChunkVals<KIND>;
  const int lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * 8 + (threadIdx.x >> 5)) * R;
  if (row0 >= N) return;
  const int chunks = K / V;
  const size_t qb = gq_code_bytes(KIND, K);
  float acc[R][NT];
  zero_acc(acc);
  for (int c0 = lane; c0 < chunks; c0 += 32 * U) {
    uint4 q[U][R];
    uint32_t sm[U][R];
    load_code_chunks<V, R, U>(w, rb, qb, gshift, row0, N, c0, 32, chunks, q, sm);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 32 * u;
      if (c >= chunks) break;
      float wf[R][V];
#pragma unroll
      for (int r = 0; r < R; ++r) dequant_chunk<KIND>(q[u][r], sm[u][r], wf[r]);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const T* xt = x + size_t(t) * K + size_t(c) * V;
#pragma unroll
        for (int h = 0; h < V / 8; ++h) {
          float xf[8];
          unpack8<T>(*reinterpret_cast<const uint4*>(xt + 8 * h), xf);
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[r][t] = fmaf(wf[r][8 * h + j], xf[j], acc[r][t]);
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

template <typename T, int KIND, typename OutT>
cudaError_t launch_gemv(const void* x, const void* w, size_t rb, int gshift, const void* bias, void* out,
                        int T_, int N, int K, int ldo, cudaStream_t s) {
  auto* xp = static_cast<const T*>(x);
  auto* wp = static_cast<const uint8_t*>(w);
  auto* bp = static_cast<const T*>(bias);
  auto* op = static_cast<OutT*>(out);
  constexpr int R = KIND == kInt4 ? 2 : 4;
  const dim3 grid(ceil_div(N, 8 * R)), block(256);
  switch (T_) {
#define LL_CASE(n)                                                                              \
  case n:                                                                                       \
    gemv_gq_kernel<T, KIND, n, R, 2, OutT><<<grid, block, 0, s>>>(xp, wp, rb, gshift, bp, op, N, K, ldo); \
    break;
    LL_CASE(1) LL_CASE(2) LL_CASE(3) LL_CASE(4) LL_CASE(5) LL_CASE(6) LL_CASE(7) LL_CASE(8)
#undef LL_CASE
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T, int KIND>
__global__ void dequant_gq_kernel(const uint8_t* __restrict__ w, size_t rb, int gshift,
                                  const int32_t* __restrict__ rows, int row0, int n, int K, T* __restrict__ dst) {
  constexpr int V = kChunkVals<KIND>;
  const int chunks = K / V;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(n) * chunks) return;
  const int r = int(i / chunks), c = int(i % chunks);
  const uint8_t* row = w + size_t(rows ? rows[r] : row0 + r) * rb;
  const uint4 q = *reinterpret_cast<const uint4*>(row + size_t(c) * 16);
  const uint32_t sm = reinterpret_cast<const uint32_t*>(row + gq_code_bytes(KIND, K))[(c * V) >> gshift];
  float wf[V];
  dequant_chunk<KIND>(q, sm, wf);
  T* o = dst + size_t(r) * K + size_t(c) * V;
#pragma unroll
  for (int h = 0; h < V / 8; ++h) store8<T>(o + 8 * h, wf + 8 * h);
}

// One warp per group: reduce min / max / absmax, then each lane packs whole 32-bit words.
template <typename T, int KIND>
__global__ void quantize_gq_kernel(const T* __restrict__ src, uint8_t* __restrict__ dst, size_t rb, int G,
                                   int N, int K) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31, ng = K / G;
  if (warp >= int64_t(N) * ng) return;
  const int r = int(warp / ng), g = int(warp % ng);
  const T* xs = src + size_t(r) * K + size_t(g) * G;
  float lo = INFINITY, hi = -INFINITY;
  for (int k = lane; k < G; k += 32) {
    const float v = to_f(xs[k]);
    lo = fminf(lo, v), hi = fmaxf(hi, v);
  }
  lo = -warp_max(-lo), hi = warp_max(hi);
  const float amax = fmaxf(fabsf(lo), fabsf(hi));
  float s, m = 0.f;
  if (KIND == kInt8) s = amax / 127.f;
  else if (KIND == kFp8) s = amax / 448.f;
  else s = (hi - lo) / 15.f, m = lo;
  __half sh = __float2half_rn(s), mh = __float2half_rn(m);
  if (KIND == kInt4) {
    // 16 levels are few: clipping the range (outliers saturate, every other weight gets finer
    // steps) often lowers the group's squared error. Try shrinking it about its centre, keep the
    // best (the min/max grid included).
    float best = INFINITY;
    for (int i = 0; i < 8; ++i) {
      const float a = 1.f - 0.04f * float(i);
      const __half th = __float2half_rn((hi - lo) * a / 15.f), tm = __float2half_rn(0.5f * (hi + lo) - 0.5f * (hi - lo) * a);
      const float ts = __half2float(th), tmf = __half2float(tm), inv = ts > 0.f ? 1.f / ts : 0.f;
      float e = 0.f;
      for (int k = lane; k < G; k += 32) {
        const float v = to_f(xs[k]);
        const float d = ts * fminf(fmaxf(rintf((v - tmf) * inv), 0.f), 15.f) + tmf - v;
        e = fmaf(d, d, e);
      }
      e = warp_sum(e);
      if (e < best) best = e, sh = th, mh = tm;
    }
  }
  s = __half2float(sh), m = __half2float(mh);
  uint8_t* row = dst + size_t(r) * rb;
  if (lane == 0) {
    __half* p = reinterpret_cast<__half*>(row + gq_code_bytes(KIND, K)) + 2 * g;
    p[0] = sh, p[1] = mh;
  }
  constexpr int per_word = KIND == kInt4 ? 8 : 4;
  const float inv = s > 0.f ? 1.f / s : 0.f;
  for (int wi = lane; wi < G / per_word; wi += 32) {
    const int k0 = wi * per_word;
    uint32_t word = 0;
#pragma unroll
    for (int e = 0; e < per_word; ++e) {
      const float v = to_f(xs[k0 + e]);
      if (KIND == kInt4) {
        const uint32_t q = uint32_t(fminf(fmaxf(rintf((v - m) * inv), 0.f), 15.f));
        word |= q << ((e % 2) * 16 + (e / 2) * 4);
      } else if (KIND == kInt8) {
        const int q = int(fminf(fmaxf(rintf(v * inv), -127.f), 127.f));
        word |= uint32_t(q + 128) << (8 * e);
      } else {
        word |= uint32_t(__nv_cvt_float_to_fp8(v * inv, __NV_SATFINITE, __NV_E4M3)) << (8 * e);
      }
    }
    *reinterpret_cast<uint32_t*>(row + (size_t(g) * G + k0) * (KIND == kInt4 ? 4 : 8) / 8) = word;
  }
}

template <typename F>
cudaError_t by_kind(int kind, F&& f) {
  switch (kind) {
    case kInt8: return f(std::integral_constant<int, kInt8>{});
    case kInt4: return f(std::integral_constant<int, kInt4>{});
    case kFp8: return f(std::integral_constant<int, kFp8>{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t gemv_gq_fp32(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                         bool out_f32, int T, int N, int K, int ldo, cudaStream_t s) {
  const int gshift = group_shift(q.group);
  if (gshift < 0 || T < 1 || T > kGqGemvMaxTokens || K % 32 != 0) return cudaErrorInvalidValue;
  return by_kind(q.kind, [&](auto kc) {
    constexpr int KIND = decltype(kc)::value;
    if (act == Act::BF16)
      return out_f32 ? launch_gemv<__nv_bfloat16, KIND, float>(x, w, q.row_bytes, gshift, bias, out, T, N, K, ldo, s)
                     : launch_gemv<__nv_bfloat16, KIND, __nv_bfloat16>(x, w, q.row_bytes, gshift, bias, out, T, N, K, ldo, s);
    return out_f32 ? launch_gemv<__half, KIND, float>(x, w, q.row_bytes, gshift, bias, out, T, N, K, ldo, s)
                   : launch_gemv<__half, KIND, __half>(x, w, q.row_bytes, gshift, bias, out, T, N, K, ldo, s);
  });
}

cudaError_t dequant_gq(Act act, const GqArgs& q, const void* w, const int32_t* rows, int row0, int n, int K,
                       void* dst, cudaStream_t s, bool f32_out) {
  const int gshift = group_shift(q.group);
  if (gshift < 0 || K % 32 != 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return by_kind(q.kind, [&](auto kc) {
    constexpr int KIND = decltype(kc)::value;
    const int64_t total = int64_t(n) * (K / kChunkVals<KIND>);
    const unsigned grid = ceil_div(total, 256);
    auto* wp = static_cast<const uint8_t*>(w);
    if (f32_out)
      dequant_gq_kernel<float, KIND><<<grid, 256, 0, s>>>(wp, q.row_bytes, gshift, rows, row0, n, K,
                                                          static_cast<float*>(dst));
    else if (act == Act::BF16)
      dequant_gq_kernel<__nv_bfloat16, KIND><<<grid, 256, 0, s>>>(wp, q.row_bytes, gshift, rows, row0, n, K,
                                                                   static_cast<__nv_bfloat16*>(dst));
    else
      dequant_gq_kernel<__half, KIND><<<grid, 256, 0, s>>>(wp, q.row_bytes, gshift, rows, row0, n, K,
                                                           static_cast<__half*>(dst));
    return cudaGetLastError();
  });
}

cudaError_t quantize_gq(Act act, const GqArgs& q, const void* src, void* dst, int N, int K, cudaStream_t s) {
  const int G = q.group ? q.group : K;
  if (K % 32 != 0 || K % G != 0 || G % 8 != 0) return cudaErrorInvalidValue;
  if (cudaError_t e = cudaMemsetAsync(dst, 0, q.row_bytes * size_t(N), s); e != cudaSuccess) return e;
  return by_kind(q.kind, [&](auto kc) {
    constexpr int KIND = decltype(kc)::value;
    const int64_t warps = int64_t(N) * (K / G);
    const unsigned grid = ceil_div(warps * 32, 256);
    auto* dp = static_cast<uint8_t*>(dst);
    if (act == Act::BF16)
      quantize_gq_kernel<__nv_bfloat16, KIND><<<grid, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(src), dp,
                                                                   q.row_bytes, G, N, K);
    else
      quantize_gq_kernel<__half, KIND><<<grid, 256, 0, s>>>(static_cast<const __half*>(src), dp, q.row_bytes,
                                                            G, N, K);
    return cudaGetLastError();
  });
}

}  // namespace lite_llama::cuda
