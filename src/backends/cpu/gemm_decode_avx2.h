// One-token (decode) tiles of gemm_f32 for Q4_0 / Q4_1 / Q8_0 weights on AVX2 (included by
// gemm_tiles.h only). The block tiles spend most of an AVX2 core on widening bytes (vpmovzx,
// two per 8 weights on Zen 3's two shuffle pipes) and on an FMA per weight to apply the block's
// scale. Here the activation row is laid out once per call in the order the nibbles come out
// of one 16-byte load with per-lane shifts (vpsrlvd + and + cvt, no shuffles), and the scale
// and offset leave the inner loop:
//   sum_j (d q_j + m) x_j = d * sum_j q_j x_j + m * sum_j x_j   (Q4_0: m = -8 d)
// q_j is an exact small integer in fp32, so the products are the reference's up to the order
// of the additions and one rounding of d times the block sum.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/simd_f32.h"
#include "core/dtype.h"

#if LL_VEC == 8
namespace lite_llama::cpu {
namespace {
namespace decode {

constexpr int kRows = 4;  // rows a tile streams at once (more spill on AVX2's 16 registers)

// Element of a 32-weight Q4 block in lane i of vector v after prepare_q4: lanes 0-3 take the low
// nibble of byte v of dwords 0-3 (elements 4i + v), lanes 4-7 the high nibble (+16).
inline int q4_lane_element(int v, int i) { return i < 4 ? 4 * i + v : 4 * (i - 4) + v + 16; }

// xp[K]: x in q4_lane_element order per block; sums[K/32]: each block's sum of x.
inline void prepare_q4(const float* x, int64_t K, float* xp, float* sums) {
  for (int64_t b = 0; b < K / 32; ++b) {
    const float* xb = x + 32 * b;
    // A tree sum: the offset term's error stays that of a short chain.
    sums[b] = simd::vsum(_mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8)),
                                       _mm256_add_ps(_mm256_loadu_ps(xb + 16), _mm256_loadu_ps(xb + 24))));
    for (int v = 0; v < 4; ++v)
      for (int i = 0; i < 8; ++i) xp[32 * b + 8 * v + i] = xb[q4_lane_element(v, i)];
  }
}

// kRows rows x 1 token of Q4_0 / Q4_1 against prepared x.
template <DType t>
inline void tile_q4(const uint8_t* w, size_t stride, const float* xp, const float* sums,
                    int64_t K, float* out) {
  using Block = std::conditional_t<t == DType::Q4_1, BlockQ4_1, BlockQ4_0>;
  const __m256i sh0 = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  const __m256i sh1 = _mm256_setr_epi32(8, 8, 8, 8, 12, 12, 12, 12);
  const __m256i sh2 = _mm256_setr_epi32(16, 16, 16, 16, 20, 20, 20, 20);
  const __m256i sh3 = _mm256_setr_epi32(24, 24, 24, 24, 28, 28, 28, 28);
  const __m256i m4 = _mm256_set1_epi32(15);
  __m256 acc[kRows];
  __m128 offv[kRows];
  float off[kRows];
  for (int r = 0; r < kRows; ++r) {
    acc[r] = _mm256_setzero_ps();
    offv[r] = _mm_setzero_ps();
    off[r] = 0;
  }
  for (int64_t k = 0; k < K; k += 32) {
    const __m256 x0 = _mm256_loadu_ps(xp + k), x1 = _mm256_loadu_ps(xp + k + 8);
    const __m256 x2 = _mm256_loadu_ps(xp + k + 16), x3 = _mm256_loadu_ps(xp + k + 24);
    const float sx = sums[k / 32];
    const __m128 sxv = _mm_setr_ps(0.f, sx, 0.f, 0.f);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const Block* b = reinterpret_cast<const Block*>(w + size_t(r) * stride) + k / 32;
      const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs)));
      __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(q, sh0), m4)), x0);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(q, sh1), m4)), x1, s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(q, sh2), m4)), x2, s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(q, sh3), m4)), x3, s);
      if constexpr (t == DType::Q4_1) {  // d and m converted together: lane 1 sums m * sx
        uint32_t dm_bits;
        std::memcpy(&dm_bits, &b->d, 4);
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(int(dm_bits)));
        acc[r] = _mm256_fmadd_ps(s, _mm256_broadcastss_ps(dm), acc[r]);
        offv[r] = _mm_fmadd_ps(dm, sxv, offv[r]);
      } else {
        const float d = _cvtsh_ss(b->d);
        acc[r] = _mm256_fmadd_ps(s, _mm256_set1_ps(d), acc[r]);
        off[r] -= 8.f * d * sx;
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    out[r] = simd::vsum(acc[r]) + off[r] + _mm_cvtss_f32(_mm_movehdup_ps(offv[r]));
}

// kRows rows x 1 token of Q8_0 (x in natural order).
inline void tile_q8(const uint8_t* w, size_t stride, const float* x, int64_t K, float* out) {
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    const __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
    const __m256 x2 = _mm256_loadu_ps(x + k + 16), x3 = _mm256_loadu_ps(x + k + 24);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(w + size_t(r) * stride) + k / 32;
      auto q8 = [&](int i) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + 8 * i))));
      };
      __m256 s = _mm256_mul_ps(q8(0), x0);
      s = _mm256_fmadd_ps(q8(1), x1, s);
      s = _mm256_fmadd_ps(q8(2), x2, s);
      s = _mm256_fmadd_ps(q8(3), x3, s);
      acc[r] = _mm256_fmadd_ps(s, _mm256_set1_ps(_cvtsh_ss(b->d)), acc[r]);
    }
  }
  for (int r = 0; r < kRows; ++r) out[r] = simd::vsum(acc[r]);
}

// The next tile's rows, prefetched while this one computes (a row is a few hundred bytes: too
// short a run for the hardware prefetcher).
inline void prefetch(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

// out[r] = W[r] . x for one token; returns false for other weight types. Rows left over after
// the last full tile go through a one-row tile by repeating the last row into a padded tile.
template <DType t>
void gemv(const uint8_t* base, size_t stride, int64_t rows, const float* x, int64_t K, float* out,
          float* scratch) {
  constexpr bool q4 = t == DType::Q4_0 || t == DType::Q4_1;
  float* xp = scratch;
  float* sums = scratch + K;
  if constexpr (q4) prepare_q4(x, K, xp, sums);
  auto run = [&](const uint8_t* w, size_t st, float* o) {
    if constexpr (q4)
      tile_q4<t>(w, st, xp, sums, K, o);
    else
      tile_q8(w, st, x, K, o);
  };
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    if (r + 2 * kRows <= rows) prefetch(base + size_t(r + kRows) * stride, kRows * stride);
    run(base + size_t(r) * stride, stride, out + r);
  }
  if (r < rows) {  // the tail: stride 0 repeats one row kRows times
    float tmp[kRows];
    for (; r < rows; ++r) {
      run(base + size_t(r) * stride, 0, tmp);
      out[r] = tmp[0];
    }
  }
}

}  // namespace decode
}  // namespace
}  // namespace lite_llama::cpu
#endif
