// Building blocks of the flash-style attention tile of one instruction set (attention_item.h puts
// them together; included by kernels_<isa>.cpp only): scores, online-softmax updates and P V
// over tiles of kKeyTile keys gathered through the slot table.
// A lone query token (decode) takes tile_one_token: the rows of several KV heads, K/V slot rows
// read whole in address order with prefetches ahead, each row's arithmetic unchanged (a row's
// result must not depend on the other rows of its item: a cached prompt's last token runs alone,
// the same token uncached inside a prefill chunk).
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
#if LL_VEC == 8
// AVX2 blocks (16 registers), measured on Zen 4 (one layer of a 2k prefill, ms): score_block
// rows x keys 3x2 82, 2x3 85, 2x2 88, 1x4 100; P V rows x vectors 3x4 80, 4x2 81, 5x2 81, 1x8 102.
constexpr int kAvx2ScoreRows = 3, kAvx2ScoreKeys = 2;
constexpr int kAvx2PvRows = 3, kAvx2PvCols = 4;
#endif

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
// x in a register: keeps GCC from folding a load shared by several FMAs into each of them (one
// load per FMA made P V load-bound).
inline simd::V in_reg(simd::V x) {
  asm("" : "+v"(x));
  return x;
}

// P V for R rows of one head (o, p rows kKeyTile apart), each V load shared: a whole row of C
// vectors (head_dim 64 on AVX-512: C = 4) in registers, even and odd keys into separate
// accumulators (2C independent FMA chains, where one chain per vector would wait on the FMA
// latency every key). accumulate() is the R = 1 case, so every row sums alike.
template <int R, int C, int NK = 0>  // NK: nk known at compile time (a full tile: fully unrolled)
inline void accumulate_rows(float* o, int D, const float* alpha, const float* p, const float* const* v,
                            int voff, int nk_) {
  using namespace simd;
  const int nk = NK ? NK : nk_;
  V a0[R][C], a1[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const V x = vload(o + r * D + c * LL_VEC);
      a0[r][c] = alpha[r] == 1.0f ? x : vmul(x, vset1(alpha[r]));
      a1[r][c] = vzero();
    }
  int j = 0;
  for (; j + 2 <= nk; j += 2) {  // one key's R weights live at a time (registers: 2RC + R + 1)
    V w[R];
    for (int r = 0; r < R; ++r) w[r] = vset1(p[r * kKeyTile + j]);
    for (int c = 0; c < C; ++c) {
      const V x = in_reg(vload(v[j] + voff + c * LL_VEC));
      for (int r = 0; r < R; ++r) a0[r][c] = vfma(w[r], x, a0[r][c]);
    }
    for (int r = 0; r < R; ++r) w[r] = vset1(p[r * kKeyTile + j + 1]);
    for (int c = 0; c < C; ++c) {
      const V x = in_reg(vload(v[j + 1] + voff + c * LL_VEC));
      for (int r = 0; r < R; ++r) a1[r][c] = vfma(w[r], x, a1[r][c]);
    }
  }
  if (j < nk)
    for (int c = 0; c < C; ++c) {
      const V x0 = vload(v[j] + voff + c * LL_VEC);
      for (int r = 0; r < R; ++r) a0[r][c] = vfma(vset1(p[r * kKeyTile + j]), x0, a0[r][c]);
    }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) vstore(o + r * D + c * LL_VEC, vadd(a0[r][c], a1[r][c]));
}

// Blocks of CB vectors (one chain each) of the first D floats of R rows (row stride D; R = 1:
// any stride), D a multiple of 8 vectors. A vector's chain is the same whatever R and CB (AVX2
// takes several rows by narrower blocks: 16 registers).
template <int R, int CB = 8>
inline void accumulate_rows8(float* o, int D, const float* alpha, const float* p, const float* const* v,
                             int voff, int nk) {
  using namespace simd;
  for (int i = 0; i < D; i += CB * LL_VEC) {
    V acc[R][CB];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < CB; ++c) {
        const V x = vload(o + r * D + i + c * LL_VEC);
        acc[r][c] = alpha[r] == 1.0f ? x : vmul(x, vset1(alpha[r]));
      }
    for (int j = 0; j < nk; ++j)
      for (int c = 0; c < CB; ++c) {
        V x = vload(v[j] + voff + i + c * LL_VEC);
        if constexpr (CB < 8) x = in_reg(x);  // one load for the R rows
        for (int r = 0; r < R; ++r) acc[r][c] = vfma(vset1(p[r * kKeyTile + j]), x, acc[r][c]);
      }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < CB; ++c) vstore(o + r * D + i + c * LL_VEC, acc[r][c]);
  }
}

#endif

// o[0..n) = o * alpha + sum_j p[j] * v_j[0..n) over nk keys.
inline void accumulate(float* o, float alpha, const float* p, const float* const* v, int nk, int n) {
  int i = 0;
#if LL_VEC > 1
  using namespace simd;
  if (n == 4 * LL_VEC) return accumulate_rows<1, 4>(o, n, &alpha, p, v, 0, nk);
  if (n == 2 * LL_VEC) return accumulate_rows<1, 2>(o, n, &alpha, p, v, 0, nk);
  i = n - n % (8 * LL_VEC);  // eight vectors of the row stay in registers
  if (i > 0) accumulate_rows8<1>(o, i, &alpha, p, v, 0, nk);
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

#if LL_VEC > 1
constexpr int kPrefetchKeys = 32;  // how far ahead K / V rows are prefetched into L2

// Prefetches at key `key`: its V row into L1 for the P V pass, and the K and V rows
// kPrefetchKeys keys on into L2, each whole and in address order. The hardware prefetcher alone
// kept DRAM reads from overlapping the arithmetic (2k keys, SmolLM2, one thread: 10 ms -> 6.5 ms
// a step's attention with these). Always inlined: GCC takes a function of prefetches alone for one
// without side effects and drops calls to it.
[[gnu::always_inline]] inline void prefetch_key(const AttnTile& a, const float* vrow_j, int key, int kend) {
  const int width = a.kv_heads * a.head_dim;
  if (a.kv_f16) return;
  for (int off = 0; off < width; off += 16) _mm_prefetch(reinterpret_cast<const char*>(vrow_j + off), _MM_HINT_T0);
  if (key + kPrefetchKeys < kend) {
    const int64_t at = a.slots[key + kPrefetchKeys] * a.kv_row_stride + a.kv_offset;
    const float* kp = static_cast<const float*>(a.k) + at;
    const float* vp = static_cast<const float*>(a.v) + at;
    for (int off = 0; off < width; off += 16) _mm_prefetch(reinterpret_cast<const char*>(kp + off), _MM_HINT_T1);
    for (int off = 0; off < width; off += 16) _mm_prefetch(reinterpret_cast<const char*>(vp + off), _MM_HINT_T1);
  }
}

#if LL_VEC == 16
// vsum (GCC's _mm512_reduce_add_ps: halves, quarters, pairs, then the last two) of 16 vectors
// x_0..x_15 at once, lane k = vsum(x_k). The halves step pairs x_k with x_k+4 (k = 0-3, 8-11):
// step1 gives that pair's vector, stored at kSlot[k's pair] for finish16.
constexpr int kPairKey[8] = {0, 1, 2, 3, 8, 9, 10, 11};
constexpr int kPairSlot[8] = {0, 2, 1, 3, 4, 6, 5, 7};
inline simd::V step1(simd::V a, simd::V b) {
  return simd::vadd(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
}
// The levels after the halves: y holds the 8 step vectors by slot; lane k = op over x_k.
template <class Op>
inline simd::V finish_tree(const simd::V* y, Op op) {
  simd::V z[4], w[2];
  for (int j = 0; j < 4; ++j)
    z[j] = op(_mm512_shuffle_f32x4(y[j], y[j + 4], 0x88), _mm512_shuffle_f32x4(y[j], y[j + 4], 0xdd));
  for (int j = 0; j < 2; ++j)
    w[j] = op(_mm512_shuffle_ps(z[j], z[j + 2], 0x44), _mm512_shuffle_ps(z[j], z[j + 2], 0xee));
  return op(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xdd));
}
// The whole tree over 16 vectors in registers with an exact, order-free op (add in vsum16's
// order, max): lane k = op over x_k.
template <class Op>
inline simd::V tree16(const simd::V* x, Op op) {
  simd::V y[8];
  for (int i = 0; i < 8; ++i) {
    const simd::V a = x[kPairKey[i]], b = x[kPairKey[i] + 4];
    y[kPairSlot[i]] = op(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  }
  return finish_tree(y, op);
}
inline simd::V vadd_op(simd::V a, simd::V b) { return simd::vadd(a, b); }
inline simd::V finish16(const float* y) {  // y: the 8 step1 vectors by slot, in memory
  simd::V v[8];
  for (int i = 0; i < 8; ++i) v[i] = simd::vload(y + 16 * i);
  return finish_tree(v, vadd_op);
}
inline simd::V vsum16(const float* x) {  // x: 16 vectors by key
  simd::V v[16];
  for (int i = 0; i < 16; ++i) v[i] = simd::vload(x + 16 * i);
  return tree16(v, vadd_op);
}

// One query token, all rows of the item: per row the two chains of scores() for keys k and k + 4,
// each added and the two keys' halves summed (step1) into sb[row][slot]. Keys outer, the item's
// heads inner: K slot rows are read whole, in address order (per-head passes over 256 of every
// 768 bytes ran at a third of the bandwidth). C: vectors per head row held in registers.
template <int C>
void score_pairs(const AttnTile& a, const float* qb, const float* const* krow, const float* const* vrow,
                 int n, float* sb, int kfirst, int kend) {
  using namespace simd;
  const int D = a.head_dim;
  for (int i = 0; i < 8; ++i) {
    const int k = kPairKey[i], slot = kPairSlot[i];
    if (k >= n) {
      for (int r = 0; r < a.kv_heads * a.group; ++r) vstore(sb + (r * 8 + slot) * 16, vzero());
      continue;
    }
    const bool two = k + 4 < n;
    prefetch_key(a, vrow[k], kfirst + k, kend);
    if (two) prefetch_key(a, vrow[k + 4], kfirst + k + 4, kend);
    for (int h = 0; h < a.kv_heads; ++h) {
      const float* k0 = krow[k] + h * D;
      const float* k1 = two ? krow[k + 4] + h * D : k0;
      V x[C], z[C];
      for (int c = 0; c < C; ++c) x[c] = vload(k0 + c * 16), z[c] = vload(k1 + c * 16);
      for (int g = 0; g < a.group; ++g) {
        const int r = h * a.group + g;
        const float* qr = qb + int64_t(r) * D;
        V a0 = vzero(), a1 = vzero(), b0 = vzero(), b1 = vzero();
        for (int c = 0; c < C; c += 2) {
          const V q0 = vload(qr + c * 16), q1 = vload(qr + (c + 1) * 16);
          a0 = vfma(q0, x[c], a0);
          a1 = vfma(q1, x[c + 1], a1);
          b0 = vfma(q0, z[c], b0);
          b1 = vfma(q1, z[c + 1], b1);
        }
        vstore(sb + (r * 8 + slot) * 16, step1(vadd(a0, a1), two ? vadd(b0, b1) : vzero()));
      }
    }
  }
}

// Softmax update of every row over the tile's n keys, each row as attend_tile's per-row loop
// does it (scores * scale, max, alpha, exp_sum's exp and vsum, l = fma(l, alpha, sum): the
// contraction GCC makes there), 16 rows at a time: maxima by tree16, m / alpha / l as vectors,
// sums by vsum16, exps four rows at a time. sb null: p holds the scaled scores already.
void softmax_rows(const AttnTile& a, int rows, int n, const float* sb, float* p, float* m, float* l,
                  float* alpha) {
  using namespace simd;
  alignas(64) float sums[16 * 16], tot[16], m_old[16];
  const __mmask16 keys = __mmask16((1u << n) - 1);
  for (int r0 = 0; r0 < rows; r0 += 16) {
    const int nr = rows - r0 < 16 ? rows - r0 : 16;
    const __mmask16 live = __mmask16((1u << nr) - 1);
    V sc[16];
    for (int r = 0; r < 16; ++r) {
      sc[r] = vset1(-INFINITY);
      if (r >= nr) continue;
      float* pr = p + (r0 + r) * kKeyTile;
      const V s = sb ? vmul(finish16(sb + (r0 + r) * 8 * 16), vset1(a.scale)) : vload(pr);
      if (sb) vstore(pr, s);
      sc[r] = _mm512_mask_mov_ps(sc[r], keys, s);
    }
    const V mo = _mm512_maskz_loadu_ps(live, m + r0);
    const V mn = _mm512_max_ps(tree16(sc, [](V x, V y) { return vmax(x, y); }), mo);  // mx > m ? mx : m
    vstore(m_old, mo);
    _mm512_mask_storeu_ps(m + r0, live, mn);
    _mm512_mask_storeu_ps(alpha + r0, live, vset1(1.0f));
    for (unsigned c = live & ~unsigned(_mm512_cmp_ps_mask(mn, mo, _CMP_EQ_OQ)); c; c &= c - 1) {
      const int r = __builtin_ctz(c);
      alpha[r0 + r] = std::exp(m_old[r] - m[r0 + r]);
    }
    int r = r0;
    for (; n == kKeyTile && r + 4 <= r0 + nr; r += 4) {  // as below, four rows' exps interleaved
      V e[4];
      for (int i = 0; i < 4; ++i) e[i] = vsub(vload(p + (r + i) * kKeyTile), vset1(m[r + i]));
      vexp_n<4>(e);
      for (int i = 0; i < 4; ++i) {
        vstore(p + (r + i) * kKeyTile, e[i]);
        vstore(sums + (r + i - r0) * 16, vadd(vzero(), e[i]));
      }
    }
    for (; r < r0 + nr; ++r) {
      float* pr = p + r * kKeyTile;
      if (n == kKeyTile) {  // exp_sum over one vector
        const V e = vexp(vsub(vload(pr), vset1(m[r])));
        vstore(pr, e);
        vstore(sums + (r - r0) * 16, vadd(vzero(), e));
      } else {
        sums[(r - r0) * 16] = exp_sum(pr, n, m[r]);
      }
    }
    if (n == kKeyTile) {
      for (int i = nr; i < 16; ++i) vstore(sums + i * 16, vzero());
      vstore(tot, vsum16(sums));
    } else {
      for (int i = 0; i < 16; ++i) tot[i] = i < nr ? sums[i * 16] : 0.0f;
    }
    const V lv = _mm512_maskz_loadu_ps(live, l + r0), av = _mm512_maskz_loadu_ps(live, alpha + r0);
    _mm512_mask_storeu_ps(l + r0, live, vfma(lv, av, vload(tot)));
  }
}
#endif

#if LL_VEC == 8
// vsum4's tree (pairs, quads, then the halves) over 8 key vectors, lane k = key k's sum.
inline simd::V vsum8(const float* x) {
  using namespace simd;
  V v[8];
  for (int i = 0; i < 8; ++i) v[i] = vload(x + 8 * i);
  const V h0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const V h1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return vadd(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}
// vsum's tree (halves, lanes 0+2 / 1+3, then 0+1) of 8 vectors at once, lane r = op over x[r].
template <class Op>
inline simd::V tree8(const simd::V* x, Op op) {
  simd::V u[4], w[2];
  for (int r = 0; r < 4; ++r)
    u[r] = op(_mm256_permute2f128_ps(x[r], x[r + 4], 0x20), _mm256_permute2f128_ps(x[r], x[r + 4], 0x31));
  for (int i = 0; i < 2; ++i)
    w[i] = op(_mm256_shuffle_ps(u[2 * i], u[2 * i + 1], 0x44), _mm256_shuffle_ps(u[2 * i], u[2 * i + 1], 0xee));
  return op(_mm256_shuffle_ps(w[0], w[1], 0x88), _mm256_shuffle_ps(w[0], w[1], 0xdd));
}

// Softmax update of every row over the tile's n keys (AVX2), as attend_tile's per-row loop does it:
// each row's score vectors in sb (score_vectors' layout) summed by four keys (vsum4, as scores()),
// then max, alpha, exp_sum and l (= fma(l, alpha, sum), GCC's contraction there). Full tiles take
// 8 rows at a time: the same sums by vsum8 / tree8, m / alpha / l as vectors.
void softmax_rows(const AttnTile& a, int rows, int n, const float* sb, float* p, float* m, float* l,
                  float* alpha) {
  using namespace simd;
  auto add = [](V x, V y) { return vadd(x, y); };
  int r0 = 0;
  for (; n == kKeyTile && r0 + 8 <= rows; r0 += 8) {
    V mx[8], sums[8];
    for (int r = 0; r < 8; ++r) {
      const float* s = sb + int64_t(r0 + r) * kKeyTile * 8;
      float* pr = p + (r0 + r) * kKeyTile;
      const V s0 = vmul(vsum8(s), vset1(a.scale)), s1 = vmul(vsum8(s + 64), vset1(a.scale));
      vstore(pr, s0);
      vstore(pr + 8, s1);
      mx[r] = vmax(s0, s1);
    }
    const V mo = vload(m + r0), mn = vmax(tree8(mx, [](V x, V y) { return vmax(x, y); }), mo);  // mx > m ? mx : m
    alignas(32) float m_old[8];
    vstore(m_old, mo);
    vstore(m + r0, mn);
    vstore(alpha + r0, vset1(1.0f));
    for (unsigned c = ~unsigned(_mm256_movemask_ps(_mm256_cmp_ps(mn, mo, _CMP_EQ_OQ))) & 0xff; c; c &= c - 1) {
      const int r = __builtin_ctz(c);
      alpha[r0 + r] = std::exp(m_old[r] - m[r0 + r]);
    }
    for (int r = 0; r < 8; r += 2) {  // exp_sum of two rows, their four exps interleaved
      float* pr = p + (r0 + r) * kKeyTile;
      V e[4];
      for (int i = 0; i < 4; ++i) e[i] = vsub(vload(pr + 8 * i), vset1(m[r0 + r + i / 2]));
      vexp_n<4>(e);
      for (int i = 0; i < 4; ++i) vstore(pr + 8 * i, e[i]);
      sums[r] = vadd(vadd(vzero(), e[0]), e[1]);
      sums[r + 1] = vadd(vadd(vzero(), e[2]), e[3]);
    }
    vstore(l + r0, vfma(vload(l + r0), vload(alpha + r0), tree8(sums, add)));
  }
  for (int r = r0; r < rows; ++r) {
    const float* s = sb + int64_t(r) * kKeyTile * LL_VEC;
    float* pr = p + r * kKeyTile;
    int j = 0;
    for (; j + 4 <= n; j += 4)
      vsum4(vload(s + j * LL_VEC), vload(s + (j + 1) * LL_VEC), vload(s + (j + 2) * LL_VEC),
            vload(s + (j + 3) * LL_VEC), a.scale, pr + j);
    for (; j < n; ++j) pr[j] = vsum(vload(s + j * LL_VEC)) * a.scale;
    float mx = -INFINITY;
    for (j = 0; j < n; ++j) mx = pr[j] > mx ? pr[j] : mx;
    const float m_new = mx > m[r] ? mx : m[r];
    alpha[r] = m_new == m[r] ? 1.0f : std::exp(m[r] - m_new);
    const float sum = exp_sum(pr, n, m_new);
    l[r] = l[r] * alpha[r] + sum;
    m[r] = m_new;
  }
}
#endif

// One query token, all rows of the item (AVX2): each row's score vectors (the two chains of
// scores(), added, lanes not yet summed) for keys j < n into sb[row][j], keys outer, heads inner.
template <int C>
void score_vectors(const AttnTile& a, const float* qb, const float* const* krow, const float* const* vrow,
                   int n, float* sb, int kfirst, int kend) {
  const int D = a.head_dim, nc = C ? C : D / LL_VEC;
  using namespace simd;
  for (int j = 0; j < n; ++j) {
    prefetch_key(a, vrow[j], kfirst + j, kend);
    for (int h = 0; h < a.kv_heads; ++h) {
      const float* kr = krow[j] + h * D;
      V kv[C ? C : 1];
      if constexpr (C > 0)
        for (int c = 0; c < C; ++c) kv[c] = vload(kr + c * LL_VEC);
      for (int g = 0; g < a.group; ++g) {
        const int r = h * a.group + g;
        const float* qr = qb + int64_t(r) * D;
        V a0 = vzero(), a1 = vzero();
        for (int c = 0; c < nc; c += 2) {
          a0 = vfma(vload(qr + c * LL_VEC), C ? kv[c] : vload(kr + c * LL_VEC), a0);
          a1 = vfma(vload(qr + (c + 1) * LL_VEC), C ? kv[c + 1] : vload(kr + (c + 1) * LL_VEC), a1);
        }
        vstore(sb + (int64_t(r) * kKeyTile + j) * LL_VEC, vadd(a0, a1));
      }
    }
  }
}

// accumulate() for `rows` rows of one head: R of them at a time where the registers allow
// (AVX-512), per row otherwise; every row takes the same path and order as accumulate().
template <int R>
inline int accumulate_block(float* o, int D, const float* alpha, const float* p, const float* const* v,
                            int voff, int nk) {
  if (D == 4 * LL_VEC && nk == kKeyTile) accumulate_rows<R, 4, kKeyTile>(o, D, alpha, p, v, voff, nk);
  else if (D == 4 * LL_VEC) accumulate_rows<R, 4>(o, D, alpha, p, v, voff, nk);
  else if (D == 2 * LL_VEC) accumulate_rows<R, 2>(o, D, alpha, p, v, voff, nk);
  else if (D % (8 * LL_VEC) == 0) accumulate_rows8<R>(o, D, alpha, p, v, voff, nk);
  else return 0;
  return R;
}

inline void accumulate_head(float* o, int D, const float* alpha, const float* p, const float* const* v,
                            int voff, int nk, int rows) {
  int r = 0;
#if LL_VEC == 16
  while (rows - r >= 3) {
    const int done = accumulate_block<3>(o + r * D, D, alpha + r, p + r * kKeyTile, v, voff, nk);
    if (!done) break;
    r += done;
  }
  if (rows - r == 2) r += accumulate_block<2>(o + r * D, D, alpha + r, p + r * kKeyTile, v, voff, nk);
#else
  constexpr int RB = kAvx2PvRows, CB = kAvx2PvCols;
  if (D % (8 * LL_VEC) == 0)
    for (; rows - r >= RB; r += RB) accumulate_rows8<RB, CB>(o + r * D, D, alpha + r, p + r * kKeyTile, v, voff, nk);
#endif
  const float* vh[kKeyTile];
  for (int j = 0; j < nk; ++j) vh[j] = v[j] + voff;
  for (; r < rows; ++r) accumulate(o + int64_t(r) * D, alpha[r], p + r * kKeyTile, vh, nk, D);
}

// One key tile for the rows of one query token (all share n visible keys): scores, each row's
// softmax update, then P V per head, every row with the operations of attend_tile's per-row loop.
void tile_one_token(const AttnTile& a, const float* qb, const float* const* krow, const float* const* vrow,
                    int n, float* m, float* l, float* o, float* sb, float* p, int kfirst, int kend) {
  using namespace simd;
  const int D = a.head_dim, rows = a.kv_heads * a.group;
  float alpha[4 * kKeyTile];  // rows <= 4 * kKeyTile (attend_tile checks)
#if LL_VEC == 16
  switch (D / LL_VEC) {
    case 2: score_pairs<2>(a, qb, krow, vrow, n, sb, kfirst, kend); break;
    case 4: score_pairs<4>(a, qb, krow, vrow, n, sb, kfirst, kend); break;
    case 6: score_pairs<6>(a, qb, krow, vrow, n, sb, kfirst, kend); break;
    case 8: score_pairs<8>(a, qb, krow, vrow, n, sb, kfirst, kend); break;
    default: score_pairs<16>(a, qb, krow, vrow, n, sb, kfirst, kend);  // D = 256; others: generic path
  }
#else
  switch (D / LL_VEC) {
    case 2: score_vectors<2>(a, qb, krow, vrow, n, sb, kfirst, kend); break;
    case 4: score_vectors<4>(a, qb, krow, vrow, n, sb, kfirst, kend); break;
    case 8: score_vectors<8>(a, qb, krow, vrow, n, sb, kfirst, kend); break;
    default: score_vectors<0>(a, qb, krow, vrow, n, sb, kfirst, kend);
  }
#endif
  softmax_rows(a, rows, n, sb, p, m, l, alpha);
  for (int h = 0; h < a.kv_heads; ++h) {
    const int r0 = h * a.group;
    accumulate_head(o + int64_t(r0) * D, D, alpha + r0, p + r0 * kKeyTile, vrow, h * D, n, a.group);
  }
}

#endif

}  // namespace attn
}  // namespace
}  // namespace lite_llama::cpu
