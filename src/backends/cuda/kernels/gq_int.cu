// Integer decode GEMV of int8 / int4 GQ weights (T <= 8 tokens): activations quantised per block
// of 32 (scale d, plus the block's two 16-element sums of x for the offsets), then integer dot
// products on the packed codes. Per weight group: s * d * sum(code * xq) + m * sum(x).
//   int16 codes (d = amax / 32767, the default): dp2a, 2 products an instruction. Each x moves
//     by at most amax / 65534, finer than fp16's own rounding for all but the block's smallest
//     values, so the output is as close to the fp32 reference as a 16-bit-activation GEMV's.
//   int8 codes (amax / 127): dp4a, 4 products an instruction, llama.cpp's MMVQ scheme; its
//     rounding (up to 0.4% of amax) moves logits by ~1 and greedy text off the reference's.
// Both read the weights as the fp32 GEMV does (16-byte streaming code loads, all of a lane's
// loads issued before any math), ~0.5-0.9 instructions per weight instead of ~4.
#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/gq_common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

template <typename Q>
constexpr float kCodeMax = sizeof(Q) == 1 ? 127.f : 32767.f;

// One warp per (token, block of 32): xq [T, K] codes (nibble: in GqX::nibble order), xs [T, K / 32]
// (d, sum of x over lanes 0-15, over 16-31, sum of the codes).
template <typename T, typename Q>
__global__ void quantize_x_kernel(const T* __restrict__ x, Q* __restrict__ xq, float4* __restrict__ xs, int T_,
                                  int K, bool nibble) {
  pdl_trigger();
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
  const int nb = K / 32;
  if (warp >= T_ * nb) return;
  const int t = warp / nb, b = warp % nb;
  const float v = to_f(x[size_t(t) * K + size_t(b) * 32 + lane]);
  const float amax = warp_max(fabsf(v));
  const float d = amax / kCodeMax<Q>;
  const int q = d > 0.f ? __float2int_rn(v / d) : 0;
  const int e = lane & 7, at = nibble ? (lane & ~7) + (e < 4 ? 2 * e : 2 * e - 7) : lane;
  xq[size_t(t) * K + size_t(b) * 32 + at] = Q(q);
  const float qsum = warp_sum(float(q));  // exact: |sum| <= 32 * 32767 < 2^24
  float half = v;
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) half += __shfl_xor_sync(0xffffffffu, half, o);  // within 16 lanes
  const float hi = __shfl_sync(0xffffffffu, half, 16);
  if (lane == 0) xs[size_t(t) * nb + b] = make_float4(d, half, hi, qsum);
}

// dp2a with signed 16-bit a and unsigned 8-bit b (the high nibbles of int4 codes masked in place,
// 16 x code, exceed int8): the intrinsics only offer both signed or both unsigned.
__device__ __forceinline__ int dp2a_lo_su(uint32_t a, uint32_t b, int c) {
  int d;
  asm("dp2a.lo.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ int dp2a_hi_su(uint32_t a, uint32_t b, int c) {
  int d;
  asm("dp2a.hi.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// The activation words of one 16-byte chunk of int4 codes (32 weights), ordered as the codes'
// nibbles are: word j of the chunk holds weights 8j..8j+7 with (v & 0x0F0F0F0F) = bytes of
// weights (0, 4, 1, 5) and ((v >> 4) & 0x0F0F0F0F) = (2, 6, 3, 7) (quantize_gq's packing).
// int8 codes: p[2j] = x (0, 4, 1, 5), p[2j + 1] = x (2, 6, 3, 7) for dp4a. int16 codes: p[4j..4j+3]
// = pairs (x0, x4), (x1, x5), (x2, x6), (x3, x7) for dp2a lo / hi on those two words (stored so
// when NIB, else permuted here).
template <typename Q, bool NIB>
__device__ __forceinline__ void int4_chunk_x(const Q* __restrict__ xt, uint32_t (&p)[8 * sizeof(Q)]) {
  const uint4* xp = reinterpret_cast<const uint4*>(xt);
  if constexpr (sizeof(Q) == 1) {
    const uint4 a = __ldg(xp), b = __ldg(xp + 1);
    const uint32_t xw[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      p[2 * j] = __byte_perm(xw[2 * j], xw[2 * j + 1], 0x5140);
      p[2 * j + 1] = __byte_perm(xw[2 * j], xw[2 * j + 1], 0x7362);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 a = __ldg(xp + j);
      if constexpr (NIB) {
        p[4 * j] = a.x, p[4 * j + 1] = a.y, p[4 * j + 2] = a.z, p[4 * j + 3] = a.w;
      } else {  // x 8j..8j+7 as (x0, x1), (x2, x3), (x4, x5), (x6, x7)
        p[4 * j] = __byte_perm(a.x, a.z, 0x5410);
        p[4 * j + 1] = __byte_perm(a.x, a.z, 0x7632);
        p[4 * j + 2] = __byte_perm(a.y, a.w, 0x5410);
        p[4 * j + 3] = __byte_perm(a.y, a.w, 0x7632);
      }
    }
  }
}

// sum over the chunk's 32 weights of code * xq (codes 0..15).
template <typename Q>
__device__ __forceinline__ int int4_chunk_dot(const uint4& q, const uint32_t (&p)[8 * sizeof(Q)]) {
  const uint32_t v[4] = {q.x, q.y, q.z, q.w};
  if constexpr (sizeof(Q) == 1) {
    int isum = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      isum = __dp4a(int(v[j] & 0x0F0F0F0Fu), int(p[2 * j]), isum);
      isum = __dp4a(int((v[j] >> 4) & 0x0F0F0F0Fu), int(p[2 * j + 1]), isum);
    }
    return isum;
  } else {
    // High nibbles masked in place (16 x code): one instruction a word fewer; their sum is 16x.
    int lo = 0, hi = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t l = v[j] & 0x0F0F0F0Fu, h = v[j] & 0xF0F0F0F0u;
      lo = dp2a_lo_su(p[4 * j], l, lo);
      lo = dp2a_hi_su(p[4 * j + 1], l, lo);
      hi = dp2a_lo_su(p[4 * j + 2], h, hi);
      hi = dp2a_hi_su(p[4 * j + 3], h, hi);
    }
    return lo + (hi >> 4);  // exact: hi is a multiple of 16, |hi| < 2^27
  }
}

// sum over a chunk's 16 int8 weights (bytes hold code + 128) of code * xq; xw: the chunk's
// activation words in order (4 int8 or 2 int16 codes each).
template <typename Q>
__device__ __forceinline__ int int8_chunk_dot(const uint4& q, const uint32_t (&xw)[4 * sizeof(Q)]) {
  const uint32_t v[4] = {q.x, q.y, q.z, q.w};
  int isum = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int c = int(v[j] ^ 0x80808080u);  // code + 128 -> code
    if constexpr (sizeof(Q) == 1) {
      isum = __dp4a(c, int(xw[j]), isum);
    } else {
      isum = __dp2a_lo(int(xw[2 * j]), c, isum);
      isum = __dp2a_hi(int(xw[2 * j + 1]), c, isum);
    }
  }
  return isum;
}

// A block of 8 warps computes R x 8 / WPR rows; the WPR warps of a row group split its chunks
// (small matrices still fill the GPU), each lane issuing all R x U 16-byte loads before any math
// and reusing each activation load for R rows; then a shared-memory sum over the WPR warps.
template <int KIND, int NT, int R, int U, typename OutT, typename Q, bool NIB>
__global__ void __launch_bounds__(256) gemv_gq_int_kernel(const Q* __restrict__ xq, const float4* __restrict__ xs,
                                                          const uint8_t* __restrict__ w, size_t rb, int gshift,
                                                          const void* __restrict__ bias, bool bias_bf16,
                                                          OutT* __restrict__ out, int N, int K, int ldo, int wpr) {
  // Activation words of a chunk: 32 (int4) or 16 (int8) codes of sizeof(Q) bytes.
  constexpr int V = kChunkVals<KIND>, XW = V * int(sizeof(Q)) / 4;
  __shared__ float part[8][R][NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int row0 = (blockIdx.x * (8 / wpr) + warp / wpr) * R;
  const int sub = warp % wpr;
  const int chunks = K / V, nb = K / 32;
  const size_t qb = gq_code_bytes(KIND, K);
  float acc[R][NT];
  zero_acc(acc);
  const int stride = 32 * wpr;
  // Launched with PDL (pdl.cuh): the launch overlaps the producer's tail. Fetching the first
  // weights before this wait kept 137 registers (one block per SM), which cost more than it won.
  pdl_wait();
  for (int c0 = sub * 32 + lane; c0 < chunks; c0 += stride * U) {
    uint4 q[U][R];
    uint32_t sm[U][R];
    load_code_chunks<V, R, U>(w, rb, qb, gshift, row0, N, c0, stride, chunks, q, sm);
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
          uint32_t p[XW];
          int4_chunk_x<Q, NIB>(xq + size_t(t) * K + k0, p);
          const float dq = bs.x, sx = bs.y + bs.z;
          const int qs8 = 8 * __float2int_rn(bs.w);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            // Centred codes (q - 8) keep the activation rounding error proportional to |w|, not
            // to |w - m|: sum (q - 8) xq = isum - 8 sum xq, and m + 8 s multiplies sum x.
            const int isum = int4_chunk_dot<Q>(q[u][r], p);
            acc[r][t] += s[r] * (dq * float(isum - qs8)) + (m[r] + 8.f * s[r]) * sx;
          }
        } else {
          const uint4* xp = reinterpret_cast<const uint4*>(xq + size_t(t) * K + k0);
          uint32_t xw[XW];
#pragma unroll
          for (int h = 0; h < XW / 4; ++h) {
            const uint4 a = __ldg(xp + h);
            if constexpr (NIB) {  // (x0, x4), (x1, x5), (x2, x6), (x3, x7) -> (x0, x1), (x2, x3), ...
              xw[4 * h] = __byte_perm(a.x, a.y, 0x5410), xw[4 * h + 1] = __byte_perm(a.z, a.w, 0x5410);
              xw[4 * h + 2] = __byte_perm(a.x, a.y, 0x7632), xw[4 * h + 3] = __byte_perm(a.z, a.w, 0x7632);
            } else {
              xw[4 * h] = a.x, xw[4 * h + 1] = a.y, xw[4 * h + 2] = a.z, xw[4 * h + 3] = a.w;
            }
          }
          const float sx = (k0 & 16) ? bs.z : bs.y;
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r][t] += s[r] * (bs.x * float(int8_chunk_dot<Q>(q[u][r], xw))) + m[r] * sx;
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

template <int KIND, typename OutT, typename Q, bool NIB>
cudaError_t launch_int(const Q* xq, const float4* xs, const void* w, size_t rb, int gshift, const void* bias,
                       bool bias_bf16, void* out, int T_, int N, int K, int ldo, bool pdl, int num_sms,
                       cudaStream_t s) {
  auto* wp = static_cast<const uint8_t*>(w);
  auto* op = static_cast<OutT*>(out);
  // int4 weights with int16 codes: 4 rows a warp (each activation load serves twice the rows)
  // and 2 chunks in flight a row: at one token 0.95-1.17x the int8-code GEMV's time on the
  // Llama-3.2-1B projections against 1.20-1.28x with 2 rows x 4 chunks (H100).
  constexpr bool kWideInt4 = KIND == kInt4 && sizeof(Q) == 2;
  constexpr int R = kWideInt4 ? 4 : 2, U = kWideInt4 ? 2 : 4;
  const int wpr = gemv_warps_per_row(K / kChunkVals<KIND>, N, 32, R, U, num_sms);
  const dim3 grid(ceil_div(N, R * (8 / wpr))), block(256);
  switch (T_) {
#define LL_CASE(n)                                                                                               \
  case n:                                                                                                        \
    return launch_pdl(pdl, gemv_gq_int_kernel<KIND, n, R, U, OutT, Q, NIB>, grid, block, 0, s, xq, xs, wp, rb, gshift, \
                      bias, bias_bf16, op, N, K, ldo, wpr);
    LL_CASE(1) LL_CASE(2) LL_CASE(3) LL_CASE(4) LL_CASE(5) LL_CASE(6) LL_CASE(7) LL_CASE(8)
#undef LL_CASE
    default: return cudaErrorInvalidValue;
  }
}

template <typename Q, bool NIB>
cudaError_t run_int(Act act, const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out,
                    bool out_f32, int T, int N, int K, int ldo, void* scratch, bool x_ready, cudaStream_t s) {
  void* codes;
  float4* xs;
  gq_x_views(scratch, &codes, &xs);
  Q* xq = static_cast<Q*>(codes);
  const bool bb = act == Act::BF16;
  if (!x_ready) {
    const unsigned qgrid = ceil_div(int64_t(T) * (K / 32) * 32, 256);
    if (bb)
      quantize_x_kernel<<<qgrid, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(x), xq, xs, T, K, NIB);
    else
      quantize_x_kernel<<<qgrid, 256, 0, s>>>(static_cast<const __half*>(x), xq, xs, T, K, NIB);
  }
  auto by_out = [&](auto kc) {
    constexpr int KIND = decltype(kc)::value;
    const auto* cq = static_cast<const Q*>(xq);
    return out_f32 ? launch_int<KIND, float, Q, NIB>(cq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, q.num_sms, s)
           : bb    ? launch_int<KIND, __nv_bfloat16, Q, NIB>(cq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo,
                                                     q.pdl, q.num_sms, s)
                   : launch_int<KIND, __half, Q, NIB>(cq, xs, w, q.row_bytes, gshift, bias, bb, out, T, N, K, ldo, q.pdl, q.num_sms, s);
  };
  return q.kind == kInt4 ? by_out(std::integral_constant<int, kInt4>{})
                         : by_out(std::integral_constant<int, kInt8>{});
}

}  // namespace

cudaError_t gemv_gq(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                    bool out_f32, int T, int N, int K, int ldo, GqX xq, bool x_ready, cudaStream_t s) {
  const int gshift = group_shift(q.group);
  if (gshift < 0 || T < 1 || T > kGqGemvMaxTokens || K % 32 != 0 || q.num_sms < 1) return cudaErrorInvalidValue;
  if (xq.scratch && q.kind != kFp8 && K <= kGqMaxK) {
    // Quantising x here: in the order this kind reads best.
    const bool nib = x_ready ? xq.nibble : q.kind == kInt4;
    if (!xq.wide)
      return run_int<int8_t, false>(act, q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, xq.scratch, x_ready, s);
    return nib ? run_int<int16_t, true>(act, q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, xq.scratch, x_ready, s)
               : run_int<int16_t, false>(act, q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, xq.scratch, x_ready, s);
  }
  // 16-bit activations: tensor-core fragments for int8 / int4 (chunks within one group).
  const bool int16 = (q.kind == kInt4 && (!q.group || q.group >= 32)) || (q.kind == kInt8 && (!q.group || q.group >= 16));
  if (int16) return gemv_gq16(act, q, x, w, bias, out, out_f32, T, N, K, ldo, s);
  return gemv_gq_fp32(act, q, x, w, bias, out, out_f32, T, N, K, ldo, s);
}

}  // namespace lite_llama::cuda
