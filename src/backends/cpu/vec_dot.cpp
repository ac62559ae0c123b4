#include "backends/cpu/vec_dot.h"

#include <cmath>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LL_AVX2 1
#include <immintrin.h>
#endif

namespace lite_llama::cpu {
namespace {

#if LL_AVX2
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 nibbles of a Q4 block as bytes: low nibbles are elements 0..15, high nibbles 16..31.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  __m128i m = _mm_set1_epi8(0x0f);
  __m128i lo = _mm_and_si128(raw, m);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m);
  return _mm256_set_m128i(hi, lo);
}

// Sum of u8 x s8 products in 8 int32 lanes.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
  // u <= 255 and |s| <= 127 pairs cannot saturate int16 for the value ranges used here.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

float dot_q4_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  float mins = 0;
  for (int64_t i = 0; i < nb; ++i) {
    __m256i p = dot_u8s8(unpack_nibbles(w[i].qs), load256(x[i].qs));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(w[i].d) * x[i].d), acc);
    mins += h2f(w[i].m) * x[i].s;
  }
  return hsum(acc) + mins;
}

float dot_q4_0(const BlockQ4_0* w, const BlockQ8_1* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  float off = 0;
  for (int64_t i = 0; i < nb; ++i) {
    float d = h2f(w[i].d);
    __m256i p = dot_u8s8(unpack_nibbles(w[i].qs), load256(x[i].qs));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * x[i].d), acc);
    off += 8.f * d * x[i].s;  // stored nibbles are q + 8
  }
  return hsum(acc) - off;
}

float dot_q8_0(const BlockQ8_0* w, const BlockQ8_1* x, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i a = load256(w[i].qs), b = load256(x[i].qs);
    // |a| * (b * sign(a)) keeps the product while making the left operand unsigned.
    __m256i p = dot_u8s8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(h2f(w[i].d) * x[i].d), acc);
  }
  return hsum(acc);
}

template <typename Load>
float dot_float(const float* x, int64_t n, Load load) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(load(i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), a0);
  return hsum(_mm256_add_ps(a0, a1));
}
#endif

float dot_scalar_quant(DType t, const void* w, const BlockQ8_1* x, int64_t n) {
  // Dequantise block by block and multiply with the int8 activations (same math as the SIMD path).
  const size_t bb = dtype_info(t).block_bytes;
  float wf[kQK];
  double acc = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    dequantize_row(t, static_cast<const uint8_t*>(w) + size_t(i) * bb, wf, kQK);
    float s = 0;
    for (int j = 0; j < kQK; ++j) s += wf[j] * x[i].qs[j];
    acc += double(s) * x[i].d;
  }
  return float(acc);
}

}  // namespace

bool uses_q8_activations(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0;
}

const char* simd_name() {
#if LL_AVX2 && ((defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__))
  return "avx2+vnni";
#elif LL_AVX2
  return "avx2";
#else
  return "scalar";
#endif
}

float vec_dot(DType t, const void* w, const void* x, int64_t n) {
  const auto* xq = static_cast<const BlockQ8_1*>(x);
  const auto* xf = static_cast<const float*>(x);
#if LL_AVX2
  switch (t) {
    case DType::Q4_1: return dot_q4_1(static_cast<const BlockQ4_1*>(w), xq, n / kQK);
    case DType::Q4_0: return dot_q4_0(static_cast<const BlockQ4_0*>(w), xq, n / kQK);
    case DType::Q8_0: return dot_q8_0(static_cast<const BlockQ8_0*>(w), xq, n / kQK);
    case DType::F32: {
      auto* wf = static_cast<const float*>(w);
      float s = dot_float(xf, n, [&](int64_t i) { return _mm256_loadu_ps(wf + i); });
      for (int64_t i = n / 8 * 8; i < n; ++i) s += wf[i] * xf[i];
      return s;
    }
    case DType::F16: {
      auto* wh = static_cast<const uint16_t*>(w);
      float s = dot_float(xf, n, [&](int64_t i) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + i)));
      });
      for (int64_t i = n / 8 * 8; i < n; ++i) s += f16_to_f32(wh[i]) * xf[i];
      return s;
    }
    case DType::BF16: {
      auto* wb = static_cast<const uint16_t*>(w);
      float s = dot_float(xf, n, [&](int64_t i) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + i)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
      });
      for (int64_t i = n / 8 * 8; i < n; ++i) s += bf16_to_f32(wb[i]) * xf[i];
      return s;
    }
    default: break;
  }
#endif
  if (uses_q8_activations(t)) return dot_scalar_quant(t, w, xq, n);
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
    float buf[256];
    double acc = 0;
    size_t es = dtype_info(t).block_bytes;
    for (int64_t i = 0; i < n; i += 256) {
      int64_t m = n - i < 256 ? n - i : 256;
      dequantize_row(t, static_cast<const uint8_t*>(w) + size_t(i) * es, buf, m);
      for (int64_t j = 0; j < m; ++j) acc += double(buf[j]) * xf[i + j];
    }
    return float(acc);
  }
  fail("no CPU dot product for weights of type {}", dtype_name(t));
}

void vec_dot_rows(DType t, const void* w, size_t row_stride, int rows, const void* x, int64_t n,
                  float* out) {
  for (int r = 0; r < rows; ++r)
    out[r] = vec_dot(t, static_cast<const uint8_t*>(w) + size_t(r) * row_stride, x, n);
}

void quantize_q8_1(const float* x, BlockQ8_1* out, int64_t n) {
#if LL_AVX2
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* v = x + i * kQK;
    __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
    __m256 v2 = _mm256_loadu_ps(v + 16), v3 = _mm256_loadu_ps(v + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float amax = _mm_cvtss_f32(m4);
    float d = amax / 127.f;
    __m256 id = _mm256_set1_ps(d != 0.f ? 127.f / amax : 0.f);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), _MM_FROUND_TO_NEAREST_INT));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), _MM_FROUND_TO_NEAREST_INT));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), _MM_FROUND_TO_NEAREST_INT));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), _MM_FROUND_TO_NEAREST_INT));
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    // Pack 32 x int32 -> 32 x int8 in element order (packs work per 128-bit lane, then fix up).
    __m256i p01 = _mm256_packs_epi32(i0, i1);
    __m256i p23 = _mm256_packs_epi32(i2, i3);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[i].qs), p);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_hadd_epi32(s4, s4);
    s4 = _mm_hadd_epi32(s4, s4);
    out[i].d = d;
    out[i].s = d * float(_mm_cvtsi128_si32(s4));
  }
#else
  quantize_row_q8_1(x, out, n);
#endif
}

}  // namespace lite_llama::cpu
