// One-token GEMV with int16 activation codes (CpuTuning::int16_activations) for Q4_0 / Q4_1 /
// Q8_0 weights, for the instruction set of the including kernels_<isa>.cpp (internal linkage).
// x is quantised per 32-block to q = round(x / d), d = amax / 32767, so each value moves by at
// most d / 2 = amax / 65534 (the int8 path: amax / 254). Weight codes widen to int16 and meet q
// in exact int32 sums (vpdpwssd with AVX512_VNNI, vpmaddwd + vpaddd on AVX2); a block's sum
// turns into a float once, times d_w * d_x, plus m * sum(x) for Q4_1 (Q4_0's -8 offset stays in
// the integers: -8 * sum(q)). int32 ranges: a lane adds 4 products, 4 * 15 * 32767 < 2^21
// (Q8_0: 4 * 128 * 32767 < 2^24, so the conversion to float is still exact), plus the Q4_0
// offset 8 * 32 * 32767 < 2^23.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/simd_f32.h"
#include "core/dtype.h"
#include "core/half.h"

namespace lite_llama::cpu {
namespace {
namespace i16 {

// Rounds to nearest even, as cvtps2dq does under the default rounding mode.
inline int32_t round_code(float v) { return int32_t(std::nearbyint(v)); }

// Quantises x[K] (K a multiple of 32) into out, in q4 order (act_i16_position) or natural order.
void quantize(const float* x, int64_t K, bool q4_order, const ActI16& out) {
  for (int64_t b = 0; b < K / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0, sum = 0;
    int32_t q[32];
#if LL_VEC > 1
    using namespace simd;
    V m = vzero(), s = vzero();
    for (int j = 0; j < 32; j += LL_VEC) {
      const V v = vload(xb + j);
      m = vmax(m, vmax(v, vsub(vzero(), v)));
      s = vadd(s, v);
    }
    amax = vmaxall(m);
    sum = vsum(s);
    const V id = vset1(amax > 0 ? 32767.f / amax : 0.f);
    for (int j = 0; j < 32; j += LL_VEC) {
#if LL_VEC == 16
      _mm512_storeu_si512(q + j, _mm512_cvtps_epi32(vmul(vload(xb + j), id)));
#else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), _mm256_cvtps_epi32(vmul(vload(xb + j), id)));
#endif
    }
#else
    for (int j = 0; j < 32; ++j) {
      amax = std::fmax(amax, std::fabs(xb[j]));
      sum += xb[j];
    }
    const float id = amax > 0 ? 32767.f / amax : 0.f;
    for (int j = 0; j < 32; ++j) q[j] = round_code(xb[j] * id);
#endif
    int32_t qsum = 0;
    int16_t* qb = out.q + 32 * b;
    for (int p = 0; p < 32; ++p) {
      const int32_t v = q[q4_order ? act_i16_element(p) : p];
      qb[p] = int16_t(v < -32767 ? -32767 : v > 32767 ? 32767 : v);
      qsum += qb[p];
    }
    out.d[b] = amax / 32767.f;
    out.sum[b] = sum;
    out.qsum[b] = qsum;
  }
}

#if LL_VEC > 1
// Rows a tile streams at once. 8 rows (AVX-512's 32 registers) measured no faster than 4.
constexpr int kRows = 4;
// Tiles ahead that a tile prefetches, at its own read rate. A burst of the next tile's lines at
// its start, as gemm_tiles.h does, ran down_proj (K = 1536) at half the speed: more misses in
// flight than the core tracks; with none, the 4 row streams were not picked up either.
constexpr int kPrefetchTiles = 2;

// init + sum of the int16 products of (w0, x0) and (w1, x1) in 8 int32 lanes.
inline __m256i dot_block(__m256i init, __m256i w0, __m256i x0, __m256i w1, __m256i x1) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(_mm256_dpwssd_epi32(init, w0, x0), w1, x1);
#else
  return _mm256_add_epi32(init, _mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1)));
#endif
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// p[j * stride] in lane j, j < NT <= 4.
template <int NT>
inline __m128 token_lanes(const float* p, int64_t stride) {
  const __m128 a = _mm_unpacklo_ps(_mm_load_ss(p), NT > 1 ? _mm_load_ss(p + stride) : _mm_setzero_ps());
  if constexpr (NT <= 2) return a;
  const __m128 c = _mm_unpacklo_ps(_mm_load_ss(p + 2 * stride), NT > 3 ? _mm_load_ss(p + 3 * stride) : _mm_setzero_ps());
  return _mm_movelh_ps(a, c);
}

// R rows x NT tokens (token j's codes at x.q + j * K, its block values at x.d + j * K / 32, ...;
// out[j * ldo + r]). Q4: the 16 nibble bytes broadcast to both 128-bit lanes, dword shifts by
// 0|4 and 8|12 and a 0x000F000F mask give the 32 codes as int16 in act_i16_element order (no
// byte shuffles). Q8_0: sign-extended bytes, natural order. The weights are unpacked once per
// block for all NT tokens; each (row, token) goes through the same operations in the same order
// whatever R and NT are, so a token's result does not depend on its batch.
// pf: bytes to prefetch while the tile computes (a later tile's rows, contiguous), taken at the
// rate the tile reads its own rows; null for none.
template <DType t, int R, int NT>
void tile(const uint8_t* w, size_t stride, const ActI16& x, int64_t K, float* out, int64_t ldo,
          const uint8_t* pf = nullptr) {
  constexpr bool q4 = t == DType::Q4_0 || t == DType::Q4_1;
  const __m256i sh01 = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4);
  const __m256i sh23 = _mm256_setr_epi32(8, 8, 8, 8, 12, 12, 12, 12);
  const __m256i mask = _mm256_set1_epi32(0x000F000F);
  static_assert(NT <= 4, "Q4_1's offsets keep a token per lane of one xmm");
  const int64_t nb = K / 32;
  __m256 acc[R][NT];
  __m128 off[R];  // Q4_1: the sums of m * sum(x) (see sxv)
  for (int r = 0; r < R; ++r) {
    off[r] = _mm_setzero_ps();
    for (int j = 0; j < NT; ++j) acc[r][j] = _mm256_setzero_ps();
  }
  constexpr size_t kStep = size_t(R) * (t == DType::Q8_0 ? sizeof(BlockQ8_0) : t == DType::Q4_1 ? sizeof(BlockQ4_1) : sizeof(BlockQ4_0));
  for (int64_t b = 0; b < nb; ++b) {
    if (pf)
      for (size_t o = size_t(b) * kStep; o < size_t(b + 1) * kStep; o += 64)
        _mm_prefetch(reinterpret_cast<const char*>(pf + o), _MM_HINT_T0);
    __m256i x0[NT], x1[NT], init[NT];
    float dx[NT];
    // Q4_1's m * sum(x): one token in lane 1 (dw's m), several in lane j for token j.
    const __m128 sxv = t != DType::Q4_1 ? _mm_setzero_ps()
                       : NT == 1        ? _mm_setr_ps(0.f, x.sum[b], 0.f, 0.f)
                                        : token_lanes<NT>(x.sum + b, nb);
    for (int j = 0; j < NT; ++j) {
      const int16_t* xq = x.q + j * K + 32 * b;
      const int64_t xb = j * nb + b;
      x0[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
      x1[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16));
      dx[j] = x.d[xb];
      // Q4_0 stores q + 8: sum (q - 8) x = sum q x - 8 sum x, the correction in lane 0.
      init[j] = t == DType::Q4_0 ? _mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * x.qsum[xb])) : _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = w + size_t(r) * stride;
      __m256i w0, w1;
      __m128 dw;  // q4_1: (d, m); others: d in lane 0
      if constexpr (q4) {
        using Block = std::conditional_t<t == DType::Q4_1, BlockQ4_1, BlockQ4_0>;
        const Block* blk = reinterpret_cast<const Block*>(row) + b;
        const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs)));
        w0 = _mm256_and_si256(_mm256_srlv_epi32(raw, sh01), mask);
        w1 = _mm256_and_si256(_mm256_srlv_epi32(raw, sh23), mask);
        if constexpr (t == DType::Q4_1) {  // d and m converted together
          uint32_t dm_bits;
          std::memcpy(&dm_bits, &blk->d, 4);
          dw = _mm_cvtph_ps(_mm_cvtsi32_si128(int(dm_bits)));
          off[r] = _mm_fmadd_ps(NT == 1 ? dw : _mm_shuffle_ps(dw, dw, 0x55), sxv, off[r]);
        } else {
          dw = _mm_cvtph_ps(_mm_cvtsi32_si128(blk->d));
        }
      } else {
        const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
        w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs)));
        w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs + 16)));
        dw = _mm_cvtph_ps(_mm_cvtsi32_si128(blk->d));
      }
      // d_w * d_x: with several tokens, one broadcast of d_w and a multiply per token (the same
      // float as the scalar product); one token measured faster with the scalar product.
      const __m256 dwv = _mm256_broadcastss_ps(dw);
      for (int j = 0; j < NT; ++j) {
        const __m256i s = dot_block(t == DType::Q8_0 ? _mm256_setzero_si256() : init[j], w0, x0[j], w1, x1[j]);
        const __m256 sc = NT == 1 ? _mm256_broadcastss_ps(_mm_mul_ss(dw, _mm_set_ss(dx[j])))
                                  : _mm256_mul_ps(dwv, _mm256_set1_ps(dx[j]));
        acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    if constexpr (NT == 1) {
      out[r] = hsum(acc[r][0]) + _mm_cvtss_f32(_mm_movehdup_ps(off[r]));
    } else {
      float o[4];
      _mm_storeu_ps(o, off[r]);
      for (int j = 0; j < NT; ++j) out[j * ldo + r] = hsum(acc[r][j]) + o[j];
    }
  }
}

// Tokens a tile takes at once (each weight block unpacked once for them), and its rows: one,
// so the weights are a single sequential stream the hardware prefetcher follows (several rows'
// streams were not, and the tile has no software prefetch). 4 tokens x 1 row against 2 x 4:
// batch-8 decode 125 -> 217 tok/s on the AVX2 set, 136 -> 242 on AVX-512,
// 512-token prefill faster on both (Zen 4, 1 thread); 8 x 1 measured no faster than 4 x 1.
constexpr int kTokens = 4;  // tile's Q4_1 offsets allow at most 4
constexpr int kTokenRows = 1;

// x: T tokens' codes, contiguous (see tile).
template <DType t, int NT>
void rows_typed(const uint8_t* base, size_t stride, int64_t rows, const ActI16& x, int64_t K, float* out, int64_t ldo) {
  constexpr int R = NT == 1 ? kRows : kTokenRows;
  int64_t r = 0;
  for (; r + R <= rows; r += R) {
    const int64_t ahead = r + kPrefetchTiles * R;
    const uint8_t* pf = NT == 1 && ahead + R <= rows ? base + size_t(ahead) * stride : nullptr;
    tile<t, R, NT>(base + size_t(r) * stride, stride, x, K, out + r, ldo, pf);
  }
  for (; r < rows; ++r) tile<t, 1, NT>(base + size_t(r) * stride, stride, x, K, out + r, ldo);
}

template <DType t>
void gemm_typed(const uint8_t* base, size_t stride, int64_t rows, const ActI16& x, int T, int64_t K, float* out,
                int64_t ldo) {
  const int64_t nb = K / 32;
  int j = 0;
  for (; j < T; j += kTokens) {  // the last 2 or 3 tokens in one pass too (batch 6, 7)
    const ActI16 xj{x.q + j * K, x.d + j * nb, x.sum + j * nb, x.qsum + j * nb};
    switch (T - j < kTokens ? T - j : kTokens) {
      case 1: rows_typed<t, 1>(base, stride, rows, xj, K, out + j * ldo, ldo); break;
      case 2: rows_typed<t, 2>(base, stride, rows, xj, K, out + j * ldo, ldo); break;
      case 3: rows_typed<t, 3>(base, stride, rows, xj, K, out + j * ldo, ldo); break;
      default: rows_typed<t, kTokens>(base, stride, rows, xj, K, out + j * ldo, ldo);
    }
  }
}
#else
// Plain C: the same integer sums, one row and token at a time.
template <DType t>
void gemv_typed(const uint8_t* base, size_t stride, int64_t rows, const ActI16& x, int64_t K, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = base + size_t(r) * stride;
    float acc = 0, off = 0;
    for (int64_t b = 0; b < K / 32; ++b) {
      const int16_t* xq = x.q + 32 * b;
      int32_t s = 0;
      float d;
      if constexpr (t == DType::Q8_0) {
        const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
        for (int p = 0; p < 32; ++p) s += int32_t(blk->qs[p]) * xq[p];
        d = f16_to_f32(blk->d);
      } else {
        using Block = std::conditional_t<t == DType::Q4_1, BlockQ4_1, BlockQ4_0>;
        const Block* blk = reinterpret_cast<const Block*>(row) + b;
        for (int p = 0; p < 32; ++p) {
          const int e = act_i16_element(p);
          s += int32_t((blk->qs[e & 15] >> (e >= 16 ? 4 : 0)) & 15) * xq[p];
        }
        d = f16_to_f32(blk->d);
        if constexpr (t == DType::Q4_0) s -= 8 * x.qsum[b];
        if constexpr (t == DType::Q4_1) off += f16_to_f32(blk->m) * x.sum[b];
      }
      acc += float(s) * (d * x.d[b]);
    }
    out[r] = acc + off;
  }
}

template <DType t>
void gemm_typed(const uint8_t* base, size_t stride, int64_t rows, const ActI16& x, int T, int64_t K, float* out,
                int64_t ldo) {
  const int64_t nb = K / 32;
  for (int j = 0; j < T; ++j)
    gemv_typed<t>(base, stride, rows, ActI16{x.q + j * K, x.d + j * nb, x.sum + j * nb, x.qsum + j * nb}, K,
                  out + j * ldo);
}
#endif

// out[j * ldo + r] = W[r] . x_j for T tokens (codes contiguous, see tile); false for weight
// types without an int16 path.
bool gemm(DType t, const void* w, size_t row_stride, int64_t rows, const ActI16& x, int T, int64_t K, float* out,
          int64_t ldo) {
  const auto* base = static_cast<const uint8_t*>(w);
  if (K % 32 != 0) return false;
  switch (t) {
    case DType::Q4_0: gemm_typed<DType::Q4_0>(base, row_stride, rows, x, T, K, out, ldo); return true;
    case DType::Q4_1: gemm_typed<DType::Q4_1>(base, row_stride, rows, x, T, K, out, ldo); return true;
    case DType::Q8_0: gemm_typed<DType::Q8_0>(base, row_stride, rows, x, T, K, out, ldo); return true;
    default: return false;
  }
}

}  // namespace i16
}  // namespace
}  // namespace lite_llama::cpu
