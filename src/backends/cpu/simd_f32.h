// The fp32 vector of the CPU projection kernels (gemm_f32.cpp, gemm_kquants.h): one register of
// LL_VEC floats and the few operations their tiles need. AVX-512, AVX2 (+FMA, F16C) or none
// (LL_VEC 1: the kernels take their plain loops).
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define LL_VEC 16
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LL_VEC 8
#else
#define LL_VEC 1
#endif

#if LL_VEC > 1
#include <immintrin.h>

namespace lite_llama::cpu::simd {

constexpr int kPer = 32 / LL_VEC;  // vectors per 32 weights (one Q4/Q8 block, one K sub-block)

#if LL_VEC == 16
using V = __m512;
inline V vzero() { return _mm512_setzero_ps(); }
inline V vload(const float* p) { return _mm512_loadu_ps(p); }
inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline float vsum(V v) { return _mm512_reduce_add_ps(v); }
#else
using V = __m256;
inline V vzero() { return _mm256_setzero_ps(); }
inline V vload(const float* p) { return _mm256_loadu_ps(p); }
inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

}  // namespace lite_llama::cpu::simd
#endif
