// The SIMD tiles of gemm_f32 (fp32 activations, weight blocks dequantised in registers), for the
// instruction set this translation unit is compiled for: included only by kernels_<isa>.cpp.
// Everything here has internal linkage, so the copies built with different flags never mix.
#pragma once
#include <cstdint>
#include <cstring>

#include "backends/cpu/gemm_decode_avx2.h"
#include "backends/cpu/gemm_kquants.h"
#include "backends/cpu/simd_f32.h"
#include "core/dtype.h"

namespace lite_llama::cpu {
namespace {

#if LL_VEC > 1
using namespace simd;
#endif

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

constexpr int kBlock = 32;     // elements dequantised at a time (one Q4/Q8 block)
constexpr int kTokTile = 8;    // tokens sharing one dequantised block

#if LL_VEC == 16
inline V bytes_u8(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)); }
inline V bytes_s8(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)); }

// Dequantises 32 weights starting at element `k` of a row into w[kPer].
template <DType t>
inline void dequant(const uint8_t* row, int64_t k, V* w) {
  switch (t) {
    case DType::Q4_1: {
      auto* b = reinterpret_cast<const BlockQ4_1*>(row) + k / kBlock;
      __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs));
      __m128i m = _mm_set1_epi8(0x0f);
      V d = _mm512_set1_ps(_cvtsh_ss(b->d)), mn = _mm512_set1_ps(_cvtsh_ss(b->m));
      w[0] = _mm512_fmadd_ps(bytes_u8(_mm_and_si128(raw, m)), d, mn);
      w[1] = _mm512_fmadd_ps(bytes_u8(_mm_and_si128(_mm_srli_epi16(raw, 4), m)), d, mn);
      return;
    }
    case DType::Q4_0: {
      auto* b = reinterpret_cast<const BlockQ4_0*>(row) + k / kBlock;
      __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs));
      __m128i m = _mm_set1_epi8(0x0f);
      V d = _mm512_set1_ps(_cvtsh_ss(b->d)), off = _mm512_set1_ps(-8.0f);
      w[0] = _mm512_mul_ps(_mm512_add_ps(bytes_u8(_mm_and_si128(raw, m)), off), d);
      w[1] = _mm512_mul_ps(_mm512_add_ps(bytes_u8(_mm_and_si128(_mm_srli_epi16(raw, 4), m)), off), d);
      return;
    }
    case DType::Q8_0: {
      auto* b = reinterpret_cast<const BlockQ8_0*>(row) + k / kBlock;
      V d = _mm512_set1_ps(_cvtsh_ss(b->d));
      w[0] = _mm512_mul_ps(bytes_s8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs))), d);
      w[1] = _mm512_mul_ps(bytes_s8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + 16))), d);
      return;
    }
    case DType::F16: {
      auto* p = reinterpret_cast<const uint16_t*>(row) + k;
      w[0] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      w[1] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
      return;
    }
    case DType::BF16: {
      auto* p = reinterpret_cast<const uint16_t*>(row) + k;
      for (int i = 0; i < 2; ++i) {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * i)));
        w[i] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
      }
      return;
    }
    default: {  // F32
      auto* p = reinterpret_cast<const float*>(row) + k;
      w[0] = vload(p);
      w[1] = vload(p + 16);
      return;
    }
  }
}
#elif LL_VEC == 8
inline V u8x8(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)); }
inline V s8x8(__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)); }

template <DType t>
inline void dequant(const uint8_t* row, int64_t k, V* w) {
  switch (t) {
    case DType::Q4_1:
    case DType::Q4_0: {
      constexpr bool q41 = t == DType::Q4_1;
      const uint8_t* qs;
      V d, add;
      if (q41) {
        auto* b = reinterpret_cast<const BlockQ4_1*>(row) + k / kBlock;
        qs = b->qs;
        d = _mm256_set1_ps(_cvtsh_ss(b->d));
        add = _mm256_set1_ps(_cvtsh_ss(b->m));
      } else {
        auto* b = reinterpret_cast<const BlockQ4_0*>(row) + k / kBlock;
        qs = b->qs;
        d = _mm256_set1_ps(_cvtsh_ss(b->d));
        add = _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));
      }
      __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
      __m128i m = _mm_set1_epi8(0x0f);
      __m128i lo = _mm_and_si128(raw, m), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m);
      w[0] = _mm256_fmadd_ps(u8x8(lo), d, add);
      w[1] = _mm256_fmadd_ps(u8x8(_mm_srli_si128(lo, 8)), d, add);
      w[2] = _mm256_fmadd_ps(u8x8(hi), d, add);
      w[3] = _mm256_fmadd_ps(u8x8(_mm_srli_si128(hi, 8)), d, add);
      return;
    }
    case DType::Q8_0: {
      auto* b = reinterpret_cast<const BlockQ8_0*>(row) + k / kBlock;
      V d = _mm256_set1_ps(_cvtsh_ss(b->d));
      for (int i = 0; i < 4; ++i)
        w[i] = _mm256_mul_ps(s8x8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + 8 * i))), d);
      return;
    }
    case DType::F16: {
      auto* p = reinterpret_cast<const uint16_t*>(row) + k;
      for (int i = 0; i < 4; ++i)
        w[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * i)));
      return;
    }
    case DType::BF16: {
      auto* p = reinterpret_cast<const uint16_t*>(row) + k;
      for (int i = 0; i < 4; ++i) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * i)));
        w[i] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      }
      return;
    }
    default: {
      auto* p = reinterpret_cast<const float*>(row) + k;
      for (int i = 0; i < 4; ++i) w[i] = vload(p + 8 * i);
      return;
    }
  }
}
#endif

#if LL_VEC > 1
// R weight rows x NT tokens: R*NT independent accumulators hide the FMA latency (decode uses
// 8 rows x 1 token, prefill 1 row x 8 tokens); each weight block is dequantised once per tile.
template <DType t, int R, int NT>
void tile_blocks(const uint8_t* w, size_t stride, const float* x, int64_t K, float* out,
                 int64_t ldo) {
  V acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NT; ++i) acc[r][i] = vzero();
  for (int64_t k = 0; k < K; k += kBlock) {
    for (int r = 0; r < R; ++r) {
      V wv[kPer];
      dequant<t>(w + size_t(r) * stride, k, wv);
      for (int i = 0; i < NT; ++i)
        for (int j = 0; j < kPer; ++j)
          acc[r][i] = vfma(wv[j], vload(x + i * K + k + j * LL_VEC), acc[r][i]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < NT; ++i) out[i * ldo + r] = vsum(acc[r][i]);
}

// K-quant weights decode whole 256-element super-blocks instead (gemm_kquants.h).
template <DType t, int R, int NT>
void tile(const uint8_t* w, size_t stride, const float* x, int64_t K, float* out, int64_t ldo) {
  if constexpr (kquant::is_kquant(t))
    kquant::tile<t, R, NT>(w, stride, x, K, out, ldo);
  else
    tile_blocks<t, R, NT>(w, stride, x, K, out, ldo);
}

template <DType t, int R>
void tile_tokens(int nt, const uint8_t* w, size_t stride, const float* x, int64_t K, float* out,
                 int64_t ldo) {
  switch (nt) {
    case 1: return tile<t, R, 1>(w, stride, x, K, out, ldo);
    case 2: return tile<t, R, 2>(w, stride, x, K, out, ldo);
    case 3: return tile<t, R, 3>(w, stride, x, K, out, ldo);
    case 4: return tile<t, R, 4>(w, stride, x, K, out, ldo);
    case 5: return tile<t, R, 5>(w, stride, x, K, out, ldo);
    case 6: return tile<t, R, 6>(w, stride, x, K, out, ldo);
    case 7: return tile<t, R, 7>(w, stride, x, K, out, ldo);
    default: return tile<t, R, 8>(w, stride, x, K, out, ldo);
  }
}

// The weight type is a template parameter so the block decoder inlines into the tile loop.
// Rows of a tile stream from memory in short runs (one row is a few hundred bytes), too short
// for the hardware prefetcher: the next tile's bytes are prefetched while this one computes.
template <DType t>
void gemm_typed(const uint8_t* base, size_t row_stride, int64_t rows, const float* x, int64_t T,
                int64_t K, float* out, int64_t ldo, float* scratch) {
#if LL_VEC == 8
  if constexpr (t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0) {
    if (T == 1) return decode::gemv<t>(base, row_stride, rows, x, K, out, scratch);
  }
#endif
  auto prefetch_rows = [&](int64_t r, int64_t n) {
    if (r >= rows) return;
    const uint8_t* p = base + size_t(r) * row_stride;
    const size_t bytes = size_t(imin(n, rows - r)) * row_stride;
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  };
  if (T == 1) {
    int64_t r = 0;
    prefetch_rows(0, 8);
    for (; r + 8 <= rows; r += 8) {
      prefetch_rows(r + 8, 8);
      tile<t, 8, 1>(base + size_t(r) * row_stride, row_stride, x, K, out + r, ldo);
    }
    for (; r < rows; ++r) tile<t, 1, 1>(base + size_t(r) * row_stride, row_stride, x, K, out + r, ldo);
    return;
  }
  for (int64_t t0 = 0; t0 < T; t0 += kTokTile) {
    const int nt = int(imin(kTokTile, T - t0));
    for (int64_t r = 0; r < rows; ++r) {
      if (t0 == 0) prefetch_rows(r + 1, 1);
      tile_tokens<t, 1>(nt, base + size_t(r) * row_stride, row_stride, x + t0 * K, K,
                        out + t0 * ldo + r, ldo);
    }
  }
}
#endif

// The SIMD path for weights of type t, K a multiple of its block; false where there is none
// (the caller's plain loop takes it). scratch: at least 2 * K floats.
bool gemm_simd(DType t, const void* w, size_t row_stride, int64_t rows, const float* x, int64_t T,
               int64_t K, float* out, int64_t ldo, float* scratch) {
#if LL_VEC > 1
  const auto* base = static_cast<const uint8_t*>(w);
  if (K % kBlock == 0) {
    switch (t) {
      case DType::Q4_1: gemm_typed<DType::Q4_1>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      case DType::Q4_0: gemm_typed<DType::Q4_0>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      case DType::Q8_0: gemm_typed<DType::Q8_0>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      case DType::F16: gemm_typed<DType::F16>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      case DType::BF16: gemm_typed<DType::BF16>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      case DType::F32: gemm_typed<DType::F32>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      default: break;
    }
  }
  if (K % kQK_K == 0) {
    switch (t) {
      case DType::Q4_K: gemm_typed<DType::Q4_K>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      case DType::Q5_K: gemm_typed<DType::Q5_K>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      case DType::Q6_K: gemm_typed<DType::Q6_K>(base, row_stride, rows, x, T, K, out, ldo, scratch); return true;
      default: break;
    }
  }
#endif
  return false;
}

}  // namespace
}  // namespace lite_llama::cpu
