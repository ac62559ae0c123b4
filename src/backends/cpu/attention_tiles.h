// Flash-style attention tile of one instruction set (included by kernels_<isa>.cpp only): the
// query rows of one KV head's group (query tokens x heads of the group) over a range of keys,
// in tiles of kKeyTile keys gathered through the slot table, with an online softmax. K and V
// rows are read once per tile for all rows of the group; scores never leave the stack.
#pragma once
#include <cmath>
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "backends/cpu/simd_f32.h"
#if LL_VEC == 1  // the SIMD sets convert with F16C instructions, never through this inline
#include "core/half.h"
#endif

namespace lite_llama::cpu {
namespace {
namespace attn {

constexpr int kKeyTile = kAttnKeyTile;

inline float dot(const float* a, const float* b, int n) {
  int i = 0;
  float s = 0;
#if LL_VEC > 1
  using namespace simd;
  V acc0 = vzero(), acc1 = vzero();
  for (; i + 2 * LL_VEC <= n; i += 2 * LL_VEC) {
    acc0 = vfma(vload(a + i), vload(b + i), acc0);
    acc1 = vfma(vload(a + i + LL_VEC), vload(b + i + LL_VEC), acc1);
  }
  for (; i + LL_VEC <= n; i += LL_VEC) acc0 = vfma(vload(a + i), vload(b + i), acc0);
  s = vsum(vadd(acc0, acc1));
#endif
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// s[j] = scale * (q . k_j) for nk keys. Four keys at a time share each load of q and one
// reduction; two accumulators per key halve the dependent FMA chain (latency, not throughput,
// bounds a 64-wide dot).
inline void scores(const float* q, const float* const* k, int nk, int n, float scale, float* s) {
  int j = 0;
#if LL_VEC > 1
  using namespace simd;
  if (n % (2 * LL_VEC) == 0) {
    for (; j + 4 <= nk; j += 4) {
      V a[4][2];
      for (int t = 0; t < 4; ++t) a[t][0] = a[t][1] = vzero();
      for (int off = 0; off < n; off += 2 * LL_VEC) {
        const V q0 = vload(q + off), q1 = vload(q + off + LL_VEC);
        for (int t = 0; t < 4; ++t) {
          a[t][0] = vfma(q0, vload(k[j + t] + off), a[t][0]);
          a[t][1] = vfma(q1, vload(k[j + t] + off + LL_VEC), a[t][1]);
        }
      }
      vsum4(vadd(a[0][0], a[0][1]), vadd(a[1][0], a[1][1]), vadd(a[2][0], a[2][1]),
            vadd(a[3][0], a[3][1]), scale, s + j);
    }
  }
#endif
  for (; j < nk; ++j) s[j] = dot(q, k[j], n) * scale;
}

#if LL_VEC > 1
// A whole row of C vectors (head_dim 64 on AVX-512: C = 4) in registers, even and odd keys into
// separate accumulators: 2C independent FMA chains, where one chain per vector would wait on the
// FMA latency every key.
template <int C>
inline void accumulate_row(float* o, float alpha, const float* p, const float* const* v, int nk) {
  using namespace simd;
  V a0[C], a1[C];
  for (int c = 0; c < C; ++c) {
    a0[c] = alpha == 1.0f ? vload(o + c * LL_VEC) : vmul(vload(o + c * LL_VEC), vset1(alpha));
    a1[c] = vzero();
  }
  int j = 0;
  for (; j + 2 <= nk; j += 2) {
    const V p0 = vset1(p[j]), p1 = vset1(p[j + 1]);
    for (int c = 0; c < C; ++c) {
      a0[c] = vfma(p0, vload(v[j] + c * LL_VEC), a0[c]);
      a1[c] = vfma(p1, vload(v[j + 1] + c * LL_VEC), a1[c]);
    }
  }
  if (j < nk) {
    const V p0 = vset1(p[j]);
    for (int c = 0; c < C; ++c) a0[c] = vfma(p0, vload(v[j] + c * LL_VEC), a0[c]);
  }
  for (int c = 0; c < C; ++c) vstore(o + c * LL_VEC, vadd(a0[c], a1[c]));
}
#endif

// o[0..n) = o * alpha + sum_j p[j] * v_j[0..n) over nk keys.
inline void accumulate(float* o, float alpha, const float* p, const float* const* v, int nk, int n) {
  int i = 0;
#if LL_VEC > 1
  using namespace simd;
  if (n == 4 * LL_VEC) return accumulate_row<4>(o, alpha, p, v, nk);
  if (n == 2 * LL_VEC) return accumulate_row<2>(o, alpha, p, v, nk);
  for (; i + 8 * LL_VEC <= n; i += 8 * LL_VEC) {  // eight vectors of the row stay in registers
    V acc[8];
    for (int c = 0; c < 8; ++c) acc[c] = alpha == 1.0f ? vload(o + i + c * LL_VEC) : vmul(vload(o + i + c * LL_VEC), vset1(alpha));
    for (int j = 0; j < nk; ++j) {
      const V pj = vset1(p[j]);
      for (int c = 0; c < 8; ++c) acc[c] = vfma(pj, vload(v[j] + i + c * LL_VEC), acc[c]);
    }
    for (int c = 0; c < 8; ++c) vstore(o + i + c * LL_VEC, acc[c]);
  }
  for (; i + LL_VEC <= n; i += LL_VEC) {
    V acc = vmul(vload(o + i), vset1(alpha));
    for (int j = 0; j < nk; ++j) acc = vfma(vset1(p[j]), vload(v[j] + i), acc);
    vstore(o + i, acc);
  }
#endif
  for (; i < n; ++i) {
    float acc = o[i] * alpha;
    for (int j = 0; j < nk; ++j) acc += p[j] * v[j][i];
    o[i] = acc;
  }
}

// p[j] = e^(p[j] - m) for j < n; returns their sum.
inline float exp_sum(float* p, int n, float m) {
  int j = 0;
  float sum = 0;
#if LL_VEC > 1
  using namespace simd;
  V s = vzero();
  for (; j + LL_VEC <= n; j += LL_VEC) {
    const V e = vexp(vsub(vload(p + j), vset1(m)));
    vstore(p + j, e);
    s = vadd(s, e);
  }
  sum = vsum(s);
#endif
  for (; j < n; ++j) sum += (p[j] = std::exp(p[j] - m));
  return sum;
}

// n F16 values to fp32.
inline void widen_f16(const uint16_t* src, float* dst, int n) {
  int i = 0;
#if LL_VEC > 1
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
#else
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
#endif
}

void attend_tile(const AttnTile& a) {
  const int D = a.head_dim, rows = (a.q1 - a.q0) * a.group;
  float* m = a.m_out ? a.m_out : a.scratch;
  float* l = a.l_out ? a.l_out : a.scratch + rows;
  float* o = a.m_out ? a.o : a.scratch + 2 * rows;  // unnormalised rows [rows][D]
  for (int r = 0; r < rows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0;
    for (int d = 0; d < D; ++d) o[int64_t(r) * D + d] = 0;
  }
  const int last_pos = a.first_pos + a.q1 - 1;  // no query of this tile sees keys past it
  const int k_end = a.k1 < last_pos + 1 ? a.k1 : last_pos + 1;
  const float* krow[kKeyTile];
  const float* vrow[kKeyTile];
  float p[kKeyTile];
  for (int k0 = a.k0; k0 < k_end; k0 += kKeyTile) {
    const int nk = k_end - k0 < kKeyTile ? k_end - k0 : kKeyTile;
    for (int j = 0; j < nk; ++j) {
      const int64_t at = a.slots[k0 + j] * a.kv_row_stride + a.kv_offset;
      if (a.kv_f16) {  // widened once per tile, read by every row of the group
        float* kw = a.scratch + int64_t(rows) * (D + 2) + int64_t(j) * D;
        float* vw = kw + int64_t(kKeyTile) * D;
        widen_f16(static_cast<const uint16_t*>(a.k) + at, kw, D);
        widen_f16(static_cast<const uint16_t*>(a.v) + at, vw, D);
        krow[j] = kw;
        vrow[j] = vw;
      } else {
        krow[j] = static_cast<const float*>(a.k) + at;
        vrow[j] = static_cast<const float*>(a.v) + at;
      }
    }
    for (int r = 0; r < rows; ++r) {
      const int i = a.q0 + r / a.group, h = a.head0 + r % a.group;
      const float* qv = a.q + int64_t(i) * a.q_row_stride + int64_t(h) * D;
      const int visible = a.first_pos + i + 1 - k0;  // keys k0 .. k0 + visible - 1
      const int n = visible < nk ? visible : nk;
      if (n <= 0) continue;
      scores(qv, krow, n, D, a.scale, p);
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
      const float m_new = mx > m[r] ? mx : m[r];
      // 0 on the first tile (m = -inf); 1, without a call to exp, while the max holds.
      const float alpha = m_new == m[r] ? 1.0f : std::exp(m[r] - m_new);
      const float sum = exp_sum(p, n, m_new);
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
      accumulate(o + int64_t(r) * D, alpha, p, vrow, n, D);
    }
  }
  if (a.m_out) return;  // a partial: the caller merges
  for (int r = 0; r < rows; ++r) {
    const int i = a.q0 + r / a.group, h = a.head0 + r % a.group;
    float* out = a.o + int64_t(i) * a.q_row_stride + int64_t(h) * D;
    const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
    for (int d = 0; d < D; ++d) out[d] = o[int64_t(r) * D + d] * inv;
  }
}

}  // namespace attn
}  // namespace
}  // namespace lite_llama::cpu
