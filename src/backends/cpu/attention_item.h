// One attention work item of one instruction set (included by kernels_<isa>.cpp only): the query
// rows of one KV head's group (query tokens x heads of the group) over a range of keys, in tiles
// of kKeyTile keys with an online softmax (attention_tiles.h). K and V rows are read once per
// tile for all rows of the item; scores never leave the stack. A prefill chunk's tiles below the
// causal diagonal take tile_rows (AVX-512 and AVX2): every row's arithmetic is the lone token's
// (tile_one_token), with K and V loads shared by the rows.
#pragma once
#include "backends/cpu/attention_tiles.h"

namespace lite_llama::cpu {
namespace {
namespace attn {

#if LL_VEC == 16
// score_pairs' per-row arithmetic for R rows of a prefill chunk (q rows qr[0..R), one KV head):
// their q held in registers over the tile, each K vector loaded once for all R rows; the rows'
// scaled scores to p (rows kKeyTile apart), as softmax_rows computes them. Not inlined: its
// registers are all taken.
template <int C, int R>
[[gnu::noinline]] void score_block(const float* const* qr, const float* const* krow, int n, float scale, float* p) {
  using namespace simd;
  alignas(64) float sb[R * 8 * 16];
  V q[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) q[r][c] = vload(qr[r] + c * 16);
  for (int i = 0; i < 8; ++i) {
    const int k = kPairKey[i], slot = kPairSlot[i];
    if (k >= n) {
      for (int r = 0; r < R; ++r) vstore(sb + (r * 8 + slot) * 16, vzero());
      continue;
    }
    const bool two = k + 4 < n;
    const float* k0 = krow[k];
    const float* k1 = two ? krow[k + 4] : k0;
    V a0[R], a1[R], b0[R], b1[R];
    for (int r = 0; r < R; ++r) a0[r] = a1[r] = b0[r] = b1[r] = vzero();
    for (int c = 0; c < C; c += 2) {
      const V x0 = in_reg(vload(k0 + c * 16)), x1 = in_reg(vload(k0 + (c + 1) * 16));
      const V z0 = in_reg(vload(k1 + c * 16)), z1 = in_reg(vload(k1 + (c + 1) * 16));
      for (int r = 0; r < R; ++r) {
        a0[r] = vfma(q[r][c], x0, a0[r]);
        a1[r] = vfma(q[r][c + 1], x1, a1[r]);
        b0[r] = vfma(q[r][c], z0, b0[r]);
        b1[r] = vfma(q[r][c + 1], z1, b1[r]);
      }
    }
    for (int r = 0; r < R; ++r)
      vstore(sb + (r * 8 + slot) * 16, step1(vadd(a0[r], a1[r]), two ? vadd(b0[r], b1[r]) : vzero()));
  }
  for (int r = 0; r < R; ++r) vstore(p + r * kKeyTile, vmul(finish16(sb + r * 8 * 16), vset1(scale)));
}

#elif LL_VEC == 8
// score_vectors' per-row arithmetic (an even and an odd chain per key, added) for R rows and NK
// keys of a prefill chunk into sb (rows kKeyTile vectors apart): 2 R NK accumulators, each q and K
// vector loaded once for the block (registers: 2 R NK + R + 1 <= 16).
template <int C, int R, int NK>
[[gnu::noinline]] void score_block(const float* const* qr, const float* const* k, float* sb) {
  using namespace simd;
  V acc[R][NK][2];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NK; ++t) acc[r][t][0] = acc[r][t][1] = vzero();
  for (int c = 0; c < C; ++c) {
    V q[R];
    for (int r = 0; r < R; ++r) q[r] = in_reg(vload(qr[r] + c * 8));
    for (int t = 0; t < NK; ++t) {
      const V x = in_reg(vload(k[t] + c * 8));
      for (int r = 0; r < R; ++r) acc[r][t][c & 1] = vfma(q[r], x, acc[r][t][c & 1]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NK; ++t) vstore(sb + (r * kKeyTile + t) * 8, vadd(acc[r][t][0], acc[r][t][1]));
}

// The score vectors of `rows` rows over n keys, blocks of kAvx2ScoreRows x kAvx2ScoreKeys first.
template <int C>
void score_rows(const float* const* qr, const float* const* krow, int n, int rows, float* sb) {
  constexpr int R = kAvx2ScoreRows, NK = kAvx2ScoreKeys;
  int r = 0;
  for (; r + R <= rows; r += R) {
    int j = 0;
    for (; j + NK <= n; j += NK) score_block<C, R, NK>(qr + r, krow + j, sb + (r * kKeyTile + j) * 8);
    for (; j < n; ++j) score_block<C, R, 1>(qr + r, krow + j, sb + (r * kKeyTile + j) * 8);
  }
  for (; r < rows; ++r)
    for (int j = 0; j < n; ++j) score_block<C, 1, 1>(qr + r, krow + j, sb + (r * kKeyTile + j) * 8);
}
#endif

#if LL_VEC > 1
// One key tile for all rows of a prefill item (one KV head) where every row sees all n keys:
// tile_one_token's stages over blocks of rows, so each row's arithmetic is the lone token's.
// qrow: the rows' q, found once per item (two divisions per row and tile cost ~5%).
template <int C>
void tile_rows(const AttnTile& a, const float* const* qrow, const float* const* krow, const float* const* vrow,
               int n, float* m, float* l, float* o, float* sb, float* p) {
  constexpr int kBlock = 4 * kKeyTile;  // softmax_rows' limit
  const int D = a.head_dim, rows = (a.q1 - a.q0) * a.group;
  float alpha[kBlock];
  for (int r0 = 0; r0 < rows; r0 += kBlock) {
    const int nr = rows - r0 < kBlock ? rows - r0 : kBlock;
#if LL_VEC == 16
    constexpr int R = C <= 2 ? 4 : C <= 4 ? 3 : 2;  // registers: R (C + 4) + 4 <= 32
    int r = r0;
    for (; r + R <= r0 + nr; r += R) score_block<C, R>(qrow + r, krow, n, a.scale, p + r * kKeyTile);
    for (; r < r0 + nr; ++r) score_block<C, 1>(qrow + r, krow, n, a.scale, p + r * kKeyTile);
    softmax_rows(a, nr, n, nullptr, p + r0 * kKeyTile, m + r0, l + r0, alpha);
#else
    score_rows<C>(qrow + r0, krow, n, nr, sb);
    softmax_rows(a, nr, n, sb, p + r0 * kKeyTile, m + r0, l + r0, alpha);
#endif
    accumulate_head(o + int64_t(r0) * D, D, alpha, p + r0 * kKeyTile, vrow, 0, n, nr);
  }
}
#endif

void attend_tile(const AttnTile& a) {
  const int D = a.head_dim, rpt = a.kv_heads * a.group, rows = (a.q1 - a.q0) * rpt;
  const int width = a.kv_heads * D;  // floats of a K/V slot row the item reads
  // Scratch regions on 64-byte boundaries (vector loads and stores that split cache lines cost
  // about twice as much).
  auto align = [](float* f) { return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(f) + 63) & ~uintptr_t(63)); };
  float* const base = align(a.scratch);
  float* sb = base;                                 // score vectors [rows][kKeyTile][<= 16]
  float* pw = sb + int64_t(rows) * kKeyTile * 16;   // weights [rows][kKeyTile]
  float* kw = pw + int64_t(rows) * kKeyTile;        // F16 rows widened [kKeyTile][width], K then V
  float* vw = kw + int64_t(kKeyTile) * width;
  float* o = a.m_out ? a.o : align(vw + int64_t(kKeyTile) * width);  // unnormalised rows [rows][D]
  float* m = a.m_out ? a.m_out : align(vw + int64_t(kKeyTile) * width) + int64_t(rows) * D;
  float* l = a.l_out ? a.l_out : m + rows;
  for (int r = 0; r < rows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0;
    for (int d = 0; d < D; ++d) o[int64_t(r) * D + d] = 0;
  }
  const int last_pos = a.first_pos + a.q1 - 1;  // no query of this tile sees keys past it
  const int k_end = a.k1 < last_pos + 1 ? a.k1 : last_pos + 1;
#if LL_VEC > 1
  const bool one_token = a.q1 - a.q0 == 1 && D % (2 * LL_VEC) == 0 && rpt <= 4 * kKeyTile &&
                         (LL_VEC != 16 || D <= 8 * LL_VEC || D == 16 * LL_VEC);
#else
  (void)sb, (void)pw;
#endif
#if LL_VEC > 1
  constexpr int kMaxChunkRows = 256;
  const bool chunk_rows = a.q1 - a.q0 > 1 && a.kv_heads == 1 && D % (2 * LL_VEC) == 0 && rows <= kMaxChunkRows &&
                          (LL_VEC == 16 ? D <= 8 * LL_VEC : D <= 16 * LL_VEC || D == 256);
  const float* qrow[kMaxChunkRows];
  if (chunk_rows)
    for (int r = 0; r < rows; ++r)
      qrow[r] = a.q + int64_t(a.q0 + r / a.group) * a.q_row_stride + int64_t(a.head0 + r % a.group) * D;
#endif
  const float* krow[kKeyTile];
  const float* vrow[kKeyTile];
  const float* kh[kKeyTile];
  const float* vh[kKeyTile];
  float p[kKeyTile];
  for (int k0 = a.k0; k0 < k_end; k0 += kKeyTile) {
    const int nk = k_end - k0 < kKeyTile ? k_end - k0 : kKeyTile;
    for (int j = 0; j < nk; ++j) {
      const int64_t at = a.slots[k0 + j] * a.kv_row_stride + a.kv_offset;
      if (a.kv_f16) {  // widened once per tile, read by every row of the group
        widen_f16(static_cast<const uint16_t*>(a.k) + at, kw + int64_t(j) * width, width);
        widen_f16(static_cast<const uint16_t*>(a.v) + at, vw + int64_t(j) * width, width);
        krow[j] = kw + int64_t(j) * width;
        vrow[j] = vw + int64_t(j) * width;
      } else {
        krow[j] = static_cast<const float*>(a.k) + at;
        vrow[j] = static_cast<const float*>(a.v) + at;
      }
    }
#if LL_VEC == 16
    if (chunk_rows && a.first_pos + a.q0 + 1 - k0 >= nk) {  // no row's causal limit in this tile
      switch (D / LL_VEC) {
        case 2: tile_rows<2>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 4: tile_rows<4>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 6: tile_rows<6>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        default: tile_rows<8>(a, qrow, krow, vrow, nk, m, l, o, sb, pw);
      }
      continue;
    }
#elif LL_VEC == 8
    if (chunk_rows && a.first_pos + a.q0 + 1 - k0 >= nk) {
      switch (D / LL_VEC) {
        case 2: tile_rows<2>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 4: tile_rows<4>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 6: tile_rows<6>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 8: tile_rows<8>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 10: tile_rows<10>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 12: tile_rows<12>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 14: tile_rows<14>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        case 16: tile_rows<16>(a, qrow, krow, vrow, nk, m, l, o, sb, pw); break;
        default: tile_rows<32>(a, qrow, krow, vrow, nk, m, l, o, sb, pw);  // D = 256
      }
      continue;
    }
#endif
#if LL_VEC > 1
    if (one_token) {
      const int visible = a.first_pos + a.q0 + 1 - k0;
      const float* qb = a.q + int64_t(a.q0) * a.q_row_stride + int64_t(a.head0) * D;
      tile_one_token(a, qb, krow, vrow, visible < nk ? visible : nk, m, l, o, sb, pw, k0, k_end);
      continue;
    }
#endif
    int cur = -1;  // KV head (of the item) whose rows kh / vh point at
    for (int r = 0; r < rows; ++r) {
      const int i = a.q0 + r / rpt, h = a.head0 + r % rpt, hl = (r % rpt) / a.group;
      const float* qv = a.q + int64_t(i) * a.q_row_stride + int64_t(h) * D;
      const int visible = a.first_pos + i + 1 - k0;  // keys k0 .. k0 + visible - 1
      const int n = visible < nk ? visible : nk;
      if (n <= 0) continue;
      if (hl != cur) {
        for (int j = 0; j < nk; ++j) kh[j] = krow[j] + hl * D, vh[j] = vrow[j] + hl * D;
        cur = hl;
      }
      scores(qv, kh, n, D, a.scale, p);
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
      const float m_new = mx > m[r] ? mx : m[r];
      // 0 on the first tile (m = -inf); 1, without a call to exp, while the max holds.
      const float alpha = m_new == m[r] ? 1.0f : std::exp(m[r] - m_new);
      const float sum = exp_sum(p, n, m_new);
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
      accumulate(o + int64_t(r) * D, alpha, p, vh, n, D);
    }
  }
  if (a.m_out) return;  // a partial: the caller merges
  for (int r = 0; r < rows; ++r) {
    const int i = a.q0 + r / rpt, h = a.head0 + r % rpt;
    float* out = a.o + int64_t(i) * a.q_row_stride + int64_t(h) * D;
    const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
    for (int d = 0; d < D; ++d) out[d] = o[int64_t(r) * D + d] * inv;
  }
}

}  // namespace attn
}  // namespace
}  // namespace lite_llama::cpu
