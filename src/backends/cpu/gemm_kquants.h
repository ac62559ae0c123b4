// Q4_K / Q5_K / Q6_K weight tiles of gemm_f32 (included by gemm_tiles.h only). Per row and
// 256-element super-block the packed scales are decoded once, then the eight 32-element
// sub-blocks are dequantised in registers and multiplied with fp32 activations.
//
// The values equal dequantize_row's bit for bit: fp16 d times a 6-bit scale (and that times a
// 4/5-bit quant) is exact in fp32, so Q4_K/Q5_K's fma(q, d*sc, -dmin*m) rounds once where the
// reference rounds d*sc*q - dmin*m once, and Q6_K's (q - 32) * (d*sc) is one rounding on both
// sides. Only the order of the dot product's additions differs from the reference.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/simd_f32.h"
#include "core/dtype.h"

namespace lite_llama::cpu {
namespace {
namespace kquant {

constexpr bool is_kquant(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

#if LL_VEC > 1
using namespace simd;

// 32 unsigned quants -> w = q * d + m (kPer vectors).
inline void expand_u8(__m256i q, float d, float m, V* w) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
#if LL_VEC == 16
  const V dv = _mm512_set1_ps(d), mv = _mm512_set1_ps(m);
  w[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)), dv, mv);
  w[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi)), dv, mv);
#else
  const V dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
  w[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), dv, mv);
  w[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), dv, mv);
  w[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), dv, mv);
  w[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), dv, mv);
#endif
}

// 32 signed quants, scale s0 for the first 16 and s1 for the last 16 -> w = q * s.
inline void expand_s8(__m256i q, float s0, float s1, V* w) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
#if LL_VEC == 16
  w[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), _mm512_set1_ps(s0));
  w[1] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), _mm512_set1_ps(s1));
#else
  const V a = _mm256_set1_ps(s0), b = _mm256_set1_ps(s1);
  w[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), a);
  w[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), a);
  w[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), b);
  w[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), b);
#endif
}

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// 8 bytes (little-endian in b8) -> 8 floats times f (exact: f is an fp16 value, bytes < 256).
inline void bytes_times(uint64_t b8, float f, float* out) {
  const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(b8))));
  _mm256_storeu_ps(out, _mm256_mul_ps(v, _mm256_set1_ps(f)));
}

// Q4_K/Q5_K: the eight 6-bit (scale, min) pairs packed in 12 bytes (ggml's get_scale_min_k4),
// returned as the fp32 factors d * scale and -dmin * min of each sub-block. Bytes 0-3 hold the
// scales of sub-blocks 0-3 in their low 6 bits, bytes 4-7 the mins; sub-blocks 4-7 take their
// low 4 bits from the nibbles of bytes 8-11 and their top 2 bits from bits 6-7 of bytes 0-7.
inline void scales_k4(const uint8_t* q, float d, float dmin, float* sc, float* mn) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t lo6 = 0x3F3F3F3Fu, lo4 = 0x0F0F0F0Fu, top2 = 0x30303030u;
  const uint64_t s8 = (a & lo6) | uint64_t((c & lo4) | ((a >> 2) & top2)) << 32;
  const uint64_t m8 = (b & lo6) | uint64_t(((c >> 4) & lo4) | ((b >> 2) & top2)) << 32;
  bytes_times(s8, d, sc);
  bytes_times(m8, -dmin, mn);
}

template <DType t>
using Block = std::conditional_t<t == DType::Q4_K, BlockQ4_K,
                                 std::conditional_t<t == DType::Q5_K, BlockQ5_K, BlockQ6_K>>;

// One row's super-block scale factors, decoded once and then read by broadcasts.
// Q4_K/Q5_K: w = q * sc[s] + mn[s] per sub-block s; Q6_K: w = (q - 32) * sc[h] per 16 weights.
template <DType t>
struct Scales {
  static constexpr bool q6 = t == DType::Q6_K;
  alignas(64) float sc[16];
  float mn[q6 ? 1 : 8];
  void decode(const Block<t>* b) {
    if constexpr (q6) {  // 16 int8 scales times d (exact: fp16 times int8)
      const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
      _mm256_store_ps(sc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), d));
      _mm256_store_ps(
          sc + 8,
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), d));
    } else {
      scales_k4(b->scales, _cvtsh_ss(b->d), _cvtsh_ss(b->dmin), sc, mn);
    }
  }
};

// Dequantises sub-block s (weights 32s .. 32s + 31) of one super-block into w[kPer].
// Q4_K: sub-block s lies in the low (s even) or high (s odd) nibbles of qs[32 (s/2) + l]; Q5_K
// adds bit s of qh[l] as the 5th bit of element l. Q6_K: sub-block s = 4n + j (half n, quarter
// j) takes the low (j < 2) or high nibble of ql[64n + 32 (j & 1) + l] and bits 2j, 2j+1 of
// qh[32n + l] as bits 4-5; quants are biased by 32. (16-bit shifts: the bits an and-mask keeps
// never cross from the neighbouring byte.)
template <DType t>
inline void subblock(const Block<t>* b, const Scales<t>& f, int s, V* w) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  if constexpr (t == DType::Q6_K) {
    const int n = s >> 2, j = s & 3;
    const __m128i nib = _mm_cvtsi32_si128(4 * (j >> 1)), hsh = _mm_cvtsi32_si128(2 * j);
    const __m256i lo =
        _mm256_and_si256(_mm256_srl_epi16(load32(b->ql + 64 * n + 32 * (j & 1)), nib), m4);
    const __m256i hi =
        _mm256_and_si256(_mm256_srl_epi16(load32(b->qh + 32 * n), hsh), _mm256_set1_epi8(3));
    const __m256i q =
        _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
    expand_s8(q, f.sc[2 * s], f.sc[2 * s + 1], w);
  } else {
    __m256i q = _mm256_and_si256(
        _mm256_srl_epi16(load32(b->qs + 32 * (s >> 1)), _mm_cvtsi32_si128(4 * (s & 1))), m4);
    if constexpr (t == DType::Q5_K) {
      const __m256i h = _mm256_and_si256(_mm256_srl_epi16(load32(b->qh), _mm_cvtsi32_si128(s)),
                                         _mm256_set1_epi8(1));
      q = _mm256_or_si256(q, _mm256_slli_epi16(h, 4));
    }
    expand_u8(q, f.sc[s], f.mn[s], w);
  }
}

// R weight rows x NT tokens, as gemm_f32's block tiles: R*NT independent accumulators, each
// sub-block dequantised once and used for all NT tokens. The scales of the R rows' super-blocks
// are decoded first, so the row loop inside each sub-block stays small enough to unroll and the
// accumulators stay in registers.
template <DType t, int R, int NT>
void tile(const uint8_t* w, size_t stride, const float* x, int64_t K, float* out, int64_t ldo) {
  V acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NT; ++i) acc[r][i] = vzero();
  Scales<t> f[R];
  for (int64_t k0 = 0; k0 < K; k0 += kQK_K) {
    const Block<t>* b[R];
    for (int r = 0; r < R; ++r) {
      b[r] = reinterpret_cast<const Block<t>*>(w + size_t(r) * stride) + k0 / kQK_K;
      f[r].decode(b[r]);
    }
#pragma GCC unroll 8
    for (int s = 0; s < kQK_K / 32; ++s) {
      const float* xs = x + k0 + 32 * s;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        V wv[kPer];
        subblock<t>(b[r], f[r], s, wv);
        for (int i = 0; i < NT; ++i)
          for (int j = 0; j < kPer; ++j)
            acc[r][i] = vfma(wv[j], vload(xs + i * K + j * LL_VEC), acc[r][i]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NT; ++i) out[i * ldo + r] = vsum(acc[r][i]);
}
#endif

}  // namespace kquant
}  // namespace
}  // namespace lite_llama::cpu
