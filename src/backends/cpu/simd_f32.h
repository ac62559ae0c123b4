// The fp32 vector of the CPU kernels (gemm_tiles.h, gemm_kquants.h, ...): one register of LL_VEC
// floats and the few operations they need, for the instruction set of the including
// kernels_<isa>.cpp: AVX-512, AVX2 (+FMA, F16C) or none (LL_VEC 1: no SIMD tiles). Internal
// linkage: each kernels_<isa>.cpp has its own copy.
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

namespace lite_llama::cpu {
namespace {
namespace simd {

constexpr int kPer = 32 / LL_VEC;  // vectors per 32 weights (one Q4/Q8 block, one K sub-block)

#if LL_VEC == 16
using V = __m512;
inline V vzero() { return _mm512_setzero_ps(); }
inline V vload(const float* p) { return _mm512_loadu_ps(p); }
inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline float vsum(V v) { return _mm512_reduce_add_ps(v); }
inline V vset1(float f) { return _mm512_set1_ps(f); }
inline void vstore(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
inline V vsub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm512_div_ps(a, b); }
inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
inline float vmaxall(V v) { return _mm512_reduce_max_ps(v); }
// out[i] = scale * (sum of ai's lanes), i < 4.
inline void vsum4(V a0, V a1, V a2, V a3, float scale, float* out) {
  out[0] = vsum(a0) * scale;
  out[1] = vsum(a1) * scale;
  out[2] = vsum(a2) * scale;
  out[3] = vsum(a3) * scale;
}
inline V vround(V v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// 2^n for integral n in [-126, 127], as the float's exponent bits.
inline V vpow2i(V n) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
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
inline V vset1(float f) { return _mm256_set1_ps(f); }
inline void vstore(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
inline V vsub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V vmul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm256_div_ps(a, b); }
inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
inline V vmin(V a, V b) { return _mm256_min_ps(a, b); }
inline float vmaxall(V v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
inline void vsum4(V a0, V a1, V a2, V a3, float scale, float* out) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  _mm_storeu_ps(out, _mm_mul_ps(s, _mm_set1_ps(scale)));
}
inline V vround(V v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V vpow2i(V n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
#endif

// e^x within a few ulp (Cephes' expf: x = n ln2 + r with ln2 split so that n * its high part
// is exact, |r| <= ln2/2, a degree-5 polynomial). x is clamped to [-87.3, 88]: below, the
// result is 2^-126 instead of 0 (nothing for softmax and SiLU), above e^88 instead of inf.
// vexp_n: N vectors in place, each step across all N (independent latency chains in flight).
template <int N>
inline void vexp_n(V* x) {
  V n[N], r[N], p[N];
  for (int i = 0; i < N; ++i) x[i] = vmax(vset1(-87.33654f), vmin(x[i], vset1(88.0f)));
  for (int i = 0; i < N; ++i) n[i] = vround(vmul(x[i], vset1(1.44269504088896341f)));
  for (int i = 0; i < N; ++i) r[i] = vfma(n[i], vset1(-0.693359375f), x[i]);
  for (int i = 0; i < N; ++i) r[i] = vfma(n[i], vset1(2.12194440e-4f), r[i]);
  for (int i = 0; i < N; ++i) p[i] = vfma(vset1(1.9875691500e-4f), r[i], vset1(1.3981999507e-3f));
  for (int i = 0; i < N; ++i) p[i] = vfma(p[i], r[i], vset1(8.3334519073e-3f));
  for (int i = 0; i < N; ++i) p[i] = vfma(p[i], r[i], vset1(4.1665795894e-2f));
  for (int i = 0; i < N; ++i) p[i] = vfma(p[i], r[i], vset1(1.6666665459e-1f));
  for (int i = 0; i < N; ++i) p[i] = vfma(p[i], r[i], vset1(5.0000001201e-1f));
  for (int i = 0; i < N; ++i) p[i] = vfma(vmul(p[i], r[i]), r[i], vadd(r[i], vset1(1.0f)));
  for (int i = 0; i < N; ++i) x[i] = vmul(p[i], vpow2i(n[i]));
}
inline V vexp(V x) {
  vexp_n<1>(&x);
  return x;
}

}  // namespace simd
}  // namespace
}  // namespace lite_llama::cpu
#endif
