// Quantised (GQ, see core/gq.h) weights: GEMV for decode batches that dequantises in registers
// straight from the packed codes, a row dequantiser (prefill GEMM tiles, embedding rows) and the
// on-device quantiser behind --quantize. Codes become fp16 pairs with the 0x6400 exponent trick
// (no int->float conversions), one fp16 FMA applies scale and offset, math is then fp32.
#include <cuda_fp8.h>

#include <cstdlib>
#include <string>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/gq_common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

template <int KIND>
constexpr int kVals = KIND == kInt4 ? 32 : 16;  // weights per 16-byte chunk of codes

// One 16-byte chunk of codes -> kVals<KIND> weights (all in one group: s = low, m = high half).
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

__host__ __device__ constexpr size_t code_bytes(int kind, int K) {
  return kind == kInt4 ? size_t(K) / 2 : size_t(K);
}

// Issues the 16-byte code loads (and group-param loads) of chunks c0 + stride * u for R rows
// before any math, so a lane keeps R x U streaming loads in flight; out-of-range ones read 0.
template <int V, int R, int U>
__device__ __forceinline__ void load_chunks(const uint8_t* __restrict__ w, size_t rb, size_t qb, int gshift,
                                            int row0, int N, int c0, int stride, int chunks, uint4 (&q)[U][R],
                                            uint32_t (&sm)[U][R]) {
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

// Each warp computes R rows for NT tokens; per iteration a lane loads U chunks of every row
// (R * U streaming 16-byte loads in flight), dequantises them once and reuses them for all tokens.
template <typename T, int KIND, int NT, int R, int U, typename OutT>
__global__ void __launch_bounds__(256) gemv_gq_kernel(const T* __restrict__ x, const uint8_t* __restrict__ w,
                                                      size_t rb, int gshift, const T* __restrict__ bias,
                                                      OutT* __restrict__ out, int N, int K, int ldo) {
  constexpr int V = kVals<KIND>;
  const int lane = threadIdx.x & 31;
  const int row0 = (blockIdx.x * 8 + (threadIdx.x >> 5)) * R;
  if (row0 >= N) return;
  const int chunks = K / V;
  const size_t qb = code_bytes(KIND, K);
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
  for (int c0 = lane; c0 < chunks; c0 += 32 * U) {
    uint4 q[U][R];
    uint32_t sm[U][R];
    load_chunks<V, R, U>(w, rb, qb, gshift, row0, N, c0, 32, chunks, q, sm);
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

// --- Integer path (int8 / int4 weights, T <= 8): activations quantised to int8 per block of 32
// (scale d, plus the block's two 16-element sums of x for the offsets), then 4-way dp4a dot
// products on the packed codes: ~0.5 instructions per weight instead of ~4 for the fp32 path,
// the same scheme as llama.cpp's MMVQ. Per weight group: s * d * sum(code * xq) + m * sum(x).

// One warp per (token, block of 32): xq [T, K] int8, xs [T, K / 32] (d, sum of x over lanes 0-15,
// over 16-31, sum of the int8 codes).
template <typename T>
__global__ void quantize_x_kernel(const T* __restrict__ x, int8_t* __restrict__ xq, float4* __restrict__ xs,
                                  int T_, int K) {
  pdl_trigger();
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  const int nb = K / 32;
  if (warp >= T_ * nb) return;
  const int t = warp / nb, b = warp % nb;
  const float v = to_f(x[size_t(t) * K + size_t(b) * 32 + lane]);
  const float amax = warp_max(fabsf(v));
  const float d = amax / 127.f;
  const int q = d > 0.f ? __float2int_rn(v / d) : 0;
  xq[size_t(t) * K + size_t(b) * 32 + lane] = int8_t(q);
  const float qsum = warp_sum(float(q));  // exact: |sum| <= 32 * 127
  float half = v;
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) half += __shfl_xor_sync(0xffffffffu, half, o);  // within 16 lanes
  const float hi = __shfl_sync(0xffffffffu, half, 16);
  if (lane == 0) xs[size_t(t) * nb + b] = make_float4(d, half, hi, qsum);
}

// A block of 8 warps computes R x 8 / WPR rows; the WPR warps of a row group split its chunks
// (small matrices still fill the GPU), each lane issuing all R x U 16-byte loads before any math
// and reusing each activation load for R rows; then a shared-memory sum over the WPR warps.
template <int KIND, int NT, int R, int U, typename OutT>
__global__ void __launch_bounds__(256) gemv_gq_dp4a_kernel(const int8_t* __restrict__ xq, const float4* __restrict__ xs,
                                                           const uint8_t* __restrict__ w, size_t rb, int gshift,
                                                           const void* __restrict__ bias, bool bias_bf16,
                                                           OutT* __restrict__ out, int N, int K, int ldo, int wpr) {
  constexpr int V = kVals<KIND>;
  __shared__ float part[8][R][NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = (blockIdx.x * (8 / wpr) + warp / wpr) * R;
  const int sub = warp % wpr;
  const int chunks = K / V, nb = K / 32;
  const size_t qb = code_bytes(KIND, K);
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
  const int stride = 32 * wpr;
  // Launched with PDL (pdl.cuh): the launch overlaps the producer's tail. Fetching the first
  // weights before this wait kept 137 registers (one block per SM), which cost more than it won.
  pdl_wait();
  for (int c0 = sub * 32 + lane; c0 < chunks; c0 += stride * U) {
    uint4 q[U][R];
    uint32_t sm[U][R];
    load_chunks<V, R, U>(w, rb, qb, gshift, row0, N, c0, stride, chunks, q, sm);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + stride * u;
      if (c >= chunks) break;
      const int k0 = c * V;
      float s[R], m[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float2 f = __half22float2(as_half2(sm[u][r]));
        s[r] = f.x, m[r] = f.y;
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float4 bs = __ldg(xs + size_t(t) * nb + (k0 >> 5));
        if constexpr (KIND == kInt4) {
          const uint4* xp = reinterpret_cast<const uint4*>(xq + size_t(t) * K + k0);
          const uint4 a = __ldg(xp), b = __ldg(xp + 1);
          const uint32_t xw[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
          // Codes of word j: (v & 0x0F0F0F0F) = elements (0, 4, 1, 5), (v >> 4) & .. = (2, 6, 3, 7).
          uint32_t p0[4], p1[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            p0[j] = __byte_perm(xw[2 * j], xw[2 * j + 1], 0x5140);
            p1[j] = __byte_perm(xw[2 * j], xw[2 * j + 1], 0x7362);
          }
          const float dq = bs.x, sx = bs.y + bs.z;
          const int qs8 = 8 * __float2int_rn(bs.w);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const uint32_t v[4] = {q[u][r].x, q[u][r].y, q[u][r].z, q[u][r].w};
            int isum = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              isum = __dp4a(int(v[j] & 0x0F0F0F0Fu), int(p0[j]), isum);
              isum = __dp4a(int((v[j] >> 4) & 0x0F0F0F0Fu), int(p1[j]), isum);
            }
            // Centred codes (q - 8) keep the activation rounding error proportional to |w|, not
            // to |w - m|: sum (q - 8) xq = isum - 8 sum xq, and m + 8 s multiplies sum x.
            acc[r][t] += s[r] * (dq * float(isum - qs8)) + (m[r] + 8.f * s[r]) * sx;
          }
        } else {
          const uint4 a = __ldg(reinterpret_cast<const uint4*>(xq + size_t(t) * K + k0));
          const uint32_t xw[4] = {a.x, a.y, a.z, a.w};
          const float sx = (k0 & 16) ? bs.z : bs.y;
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const uint32_t v[4] = {q[u][r].x, q[u][r].y, q[u][r].z, q[u][r].w};
            int isum = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) isum = __dp4a(int(v[j] ^ 0x80808080u), int(xw[j]), isum);  // code + 128 -> code
            acc[r][t] += s[r] * (bs.x * float(isum)) + m[r] * sx;
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum(acc[r][t]);
      if (lane == 0) part[warp][r][t] = v;
    }
  __syncthreads();
  if (sub == 0 && lane < R * NT) {
    const int r = lane / NT, t = lane % NT;
    if (row0 + r < N) {
      float v = 0.f;
      for (int i = 0; i < wpr; ++i) v += part[warp + i][r][t];
      if (bias)
        v += bias_bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[row0 + r])
                       : __half2float(static_cast<const __half*>(bias)[row0 + r]);
      out[size_t(t) * ldo + row0 + r] = from_f<OutT>(v);
    }
  }
}

template <int KIND, typename OutT>
cudaError_t launch_dp4a(const int8_t* xq, const float4* xs, const void* w, size_t rb, int gshift, const void* bias,
                        bool bias_bf16, void* out, int T_, int N, int K, int ldo, bool pdl, cudaStream_t s) {
  auto* wp = static_cast<const uint8_t*>(w);
  auto* op = static_cast<OutT*>(out);
  constexpr int R = 2, U = 4;
  const int wpr = gemv_warps_per_row(K / kVals<KIND>, N, 32, R, U);
  const dim3 grid(ceil_div(N, R * (8 / wpr))), block(256);
  switch (T_) {
#define LL_CASE(n)                                                                                            \
  case n:                                                                                                     \
    return launch_pdl(pdl, gemv_gq_dp4a_kernel<KIND, n, R, U, OutT>, grid, block, 0, s, xq, xs, wp, rb, gshift, bias, \
                      bias_bf16, op, N, K, ldo, wpr);
    LL_CASE(1) LL_CASE(2) LL_CASE(3) LL_CASE(4) LL_CASE(5) LL_CASE(6) LL_CASE(7) LL_CASE(8)
#undef LL_CASE
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T, int KIND>
__global__ void dequant_gq_kernel(const uint8_t* __restrict__ w, size_t rb, int gshift,
                                  const int32_t* __restrict__ rows, int row0, int n, int K, T* __restrict__ dst) {
  constexpr int V = kVals<KIND>;
  const int chunks = K / V;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(n) * chunks) return;
  const int r = int(i / chunks), c = int(i % chunks);
  const uint8_t* row = w + size_t(rows ? rows[r] : row0 + r) * rb;
  const uint4 q = *reinterpret_cast<const uint4*>(row + size_t(c) * 16);
  const uint32_t sm = reinterpret_cast<const uint32_t*>(row + code_bytes(KIND, K))[(c * V) >> gshift];
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
    __half* p = reinterpret_cast<__half*>(row + code_bytes(KIND, K)) + 2 * g;
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

cudaError_t gemv_gq(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                    bool out_f32, int T, int N, int K, int ldo, void* scratch, bool x_ready, cudaStream_t s) {
  const int gshift = group_shift(q.group);
  if (gshift < 0 || T < 1 || T > kGqGemvMaxTokens || K % 32 != 0) return cudaErrorInvalidValue;
  if (scratch && q.kind != kFp8 && K <= kGqMaxK) {
    int8_t* xq;
    float4* xs;
    gq_x_views(scratch, &xq, &xs);
    const unsigned qgrid = ceil_div(int64_t(T) * (K / 32) * 32, 256);
    if (x_ready) {
    } else if (act == Act::BF16) {
      quantize_x_kernel<__nv_bfloat16><<<qgrid, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(x), xq, xs, T, K);
    } else {
      quantize_x_kernel<__half><<<qgrid, 256, 0, s>>>(static_cast<const __half*>(x), xq, xs, T, K);
    }
    const bool bb = act == Act::BF16;
    if (q.kind == kInt4)
      return out_f32 ? launch_dp4a<kInt4, float>(xq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, s)
             : bb    ? launch_dp4a<kInt4, __nv_bfloat16>(xq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, s)
                     : launch_dp4a<kInt4, __half>(xq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, s);
    return out_f32 ? launch_dp4a<kInt8, float>(xq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, s)
           : bb    ? launch_dp4a<kInt8, __nv_bfloat16>(xq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, s)
                   : launch_dp4a<kInt8, __half>(xq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, s);
  }
  // 16-bit activations: tensor-core fragments for int8 / int4 (chunks within one group).
  const bool int16 = (q.kind == kInt4 && (!q.group || q.group >= 32)) || (q.kind == kInt8 && (!q.group || q.group >= 16));
  if (int16) return gemv_gq16(act, q, x, w, bias, out, out_f32, T, N, K, ldo, s);
  return gemv_gq_fp32(act, q, x, w, bias, out, out_f32, T, N, K, ldo, s);
}

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
    const int64_t total = int64_t(n) * (K / kVals<KIND>);
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
