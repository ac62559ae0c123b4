// Shared pieces of the tensor-core attention kernels (prefill and decode), FlashAttention-2
// style: K/V tiles of kBN keys gathered from the token-level pool through the request's slot
// table with cp.async (an S-stage ring, the slot ids S - 1 tiles further ahead), and one warp's
// S = Q K^T, online softmax and O += P V on mma.sync fragments, the scores never leaving
// registers. Rows of a block are (query token, query head of the KV head's group) pairs, so a K/V
// tile read once serves every head of the group (GQA without repeat_kv).
#pragma once
#include "backends/cuda/common.cuh"
#include "backends/cuda/mma.cuh"

namespace lite_llama::cuda::attn {

constexpr int kBN = 64;        // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// 16-bit row stride of Q tiles: a 16-byte pad keeps the 8 rows of an ldmatrix in 8 banks.
template <int D>
constexpr int ld() { return D + 8; }

// Element offset of 16-byte chunk c of row r in a K/V tile. kSwz: rows of D without a pad, the
// chunk index XORed with r mod 8, which keeps the 8 rows of an ldmatrix in 8 banks as the pad
// does. With the pad most rows' 128-byte cp.async destinations cross a 128-byte smem line, and L2
// served 1.5 sector lookups per sector read (34% of them hits; ncu, H200): 16-byte cp.async of
// 128-byte pieces of 1 KiB rows read 4,214 GB/s into padded rows, 4,590 into swizzled ones
// (docs/benchmarks/long-context.md, "Swizzled K/V tiles in decode"). The decode kernel takes it;
// the mma.sync prefill keeps the pad (the XOR cost its D 128 kernel, at 255 registers, spills).
template <int D, bool kSwz>
__device__ __forceinline__ int kv_at(int r, int c) {
  static_assert(!kSwz || D % 64 == 0, "whole 8-chunk groups a row");
  return kSwz ? r * D + ((c ^ (r & 7)) << 3) : r * ld<D>() + c * 8;
}

// Slot ids of keys [k0, k0 + kBN) into dst; ids at or past key_end are not read (zeros).
__device__ __forceinline__ void load_slots(int32_t* dst, const int32_t* slots, int k0, int key_end) {
  for (int i = threadIdx.x; i < kBN; i += kThreads) {
    const bool ok = k0 + i < key_end;
    cp_async4(dst + i, ok ? slots + k0 + i : slots, ok);
  }
}

// K and V rows of keys [k0, k0 + kBN) of KV head kvh; rows at or past key_end are zeros (a zero
// row times a masked probability stays 0, where stale pool bytes could be NaN).
template <typename T, int D, bool kSwz>
__device__ __forceinline__ void load_kv(T* Ks, T* Vs, const int32_t* slot_ids, const T* k_pool,
                                        const T* v_pool, int Hkv, int kvh, int k0, int key_end) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kBN * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = k0 + r < key_end;
    const size_t off = ok ? (size_t(slot_ids[r]) * Hkv + kvh) * D + c * 8 : 0;
    cp_async16(Ks + kv_at<D, kSwz>(r, c), k_pool + off, ok);
    cp_async16(Vs + kv_at<D, kSwz>(r, c), v_pool + off, ok);
  }
}

// load_kv for keys at slots base + k0 + r: no slot ids, so no dependent trip before the K/V.
template <typename T, int D, bool kSwz>
__device__ __forceinline__ void load_kv_run(T* Ks, T* Vs, int base, const T* k_pool,
                                               const T* v_pool, int Hkv, int kvh, int k0, int key_end) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kBN * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = k0 + r < key_end;
    const size_t off = ok ? (size_t(base + k0 + r) * Hkv + kvh) * D + c * 8 : 0;
    cp_async16(Ks + kv_at<D, kSwz>(r, c), k_pool + off, ok);
    cp_async16(Vs + kv_at<D, kSwz>(r, c), v_pool + off, ok);
  }
}

// Query fragments of rows [row0, row0 + 16 MT) of a Q tile in shared memory.
template <typename T, int D, int MT>
__device__ __forceinline__ void load_q_frags(uint32_t (&q)[MT][D / 16][4], const T* Qs, int row0) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int r = row0 + mt * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
      ldmatrix_x4(q[mt][kk], Qs + r * ld<D>() + kk * 16 + ((lane >> 4) << 3));
    }
}

// K/V tiles of keys [0, n) of one sequence (slots: its slot row from key 0) through a ring of S
// stages: after start(), wait(j) makes tile j readable at K(j) / V(j) and issues tile j + S - 1.
// Tile i's commit group also carries the slot ids of tile i + S - 1, so every K/V issue reads ids
// that have landed. Every wait commits a group (empty past the end) to keep the count uniform.
template <typename T, int D, int S, bool kSwz = false>
struct KvPipe {
  static_assert(S >= 2, "at least double buffering");
  T* kv;         // S x (K, V) x kTile
  int32_t* ids;  // S x kBN
  const int32_t* slots;
  const T* k_pool;
  const T* v_pool;
  int Hkv, kvh, n, ntiles;
  int base = -1;  // >= 0: key i is at slot base + i (a contiguous run), no slot ids loaded

  static constexpr int kTile = kBN * (kSwz ? D : ld<D>());  // elements of one K or V tile (kv_at)
  static constexpr size_t kv_bytes() { return size_t(S) * 2 * kTile * sizeof(T); }  // ids follow
  static constexpr size_t smem_bytes() { return kv_bytes() + size_t(S) * kBN * sizeof(int32_t); }
  __device__ __forceinline__ const T* K(int j) const { return kv + size_t(2 * (j % S)) * kTile; }
  __device__ __forceinline__ const T* V(int j) const { return K(j) + kTile; }

  // Slot ids of tiles 0..S-2 (in the caller's open commit group, with whatever it loads), then K/V
  // of tiles 0..first-1; start_rest(first) issues the others of 0..S-2. Within a run (base >= 0)
  // no slot ids: the K/V at once.
  __device__ __forceinline__ void start(int first = S - 1) {
    if (base >= 0) {
      issue_tiles(0, first);
      return;
    }
    for (int i = 0; i < S - 1 && i < ntiles; ++i) load_slots(ids + i * kBN, slots, i * kBN, n);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    issue_tiles(0, first);
  }
  __device__ __forceinline__ void start_rest(int first) { issue_tiles(first, S - 1); }
  // K/V of tiles [from, to) of the first S - 1, a commit group each.
  __device__ __forceinline__ void issue_tiles(int from, int to) {
    for (int i = from; i < to; ++i) {
      if (i > 0) __syncthreads();  // issue(i) overwrites the ids issue(i - 1) read
      issue(i);
      cp_async_commit();
    }
  }
  __device__ __forceinline__ void issue(int i) {
    if (i < ntiles) {
      T* k = kv + size_t(2 * (i % S)) * kTile;
      if (base >= 0)
        load_kv_run<T, D, kSwz>(k, k + kTile, base, k_pool, v_pool, Hkv, kvh, i * kBN, n);
      else
        load_kv<T, D, kSwz>(k, k + kTile, ids + (i % S) * kBN, k_pool, v_pool, Hkv, kvh, i * kBN, n);
    }
    const int next = i + S - 1;
    if (base < 0 && next < ntiles) load_slots(ids + (next % S) * kBN, slots, next * kBN, n);
  }
  // Tile j landed and every warp is done with tile j - 1 (whose buffers tile j + S - 1 takes).
  __device__ __forceinline__ void wait(int j) {
    cp_async_wait<S - 2>();
    __syncthreads();
    issue(j + S - 1);
    cp_async_commit();
  }
};

// 2^x on the SFU alone: exp2f's handling of results below 2^-126 costs three more instructions a
// score, and such a probability (a log2-scaled score more than 126 below its row's maximum, whose
// own is 1) changes no sum when flushed to 0.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Rows h (0: g, 1: g + 8) of an accumulator tile in mma layout times a: the online softmax's rescale.
template <int ND>
__device__ __forceinline__ void rescale_rows(float (&o)[ND][4], int h, float a) {
#pragma unroll
  for (int nd = 0; nd < ND; ++nd) o[nd][2 * h] *= a, o[nd][2 * h + 1] *= a;
}

// One online-softmax step of a 16-row tile in mma accumulator layout (lane 4g + t holds rows g
// and g + 8 as h = 0, 1, keys key0 + 8 nt + 2 t + j in s[nt][2 h + j]), in exp2 form: with `mask`
// key k is visible to row h only below lim[h]; the scores become probabilities against the new
// row maxima m (of log2-scaled scores), and the sums l and the output o (same layout, columns for
// keys) are rescaled. A row with no visible key yet (max -inf) contributes nothing. kHalves 1
// steps rows 0-7 only (h = 0): rows 8-15 of a zero query tile keep scores of exactly 0, so their
// probabilities, and what they add to O, are 0. The scale is applied inside exp2's argument by
// one fma (the maximum of scaled scores is the scaled maximum: the scale is positive).
// kRescaleO false leaves o alone and returns the factors in alpha, for a caller whose P V product
// still accumulates into o while the next tile's scores are stepped.
// kLazyMax (FlashAttention-4's lazy rescale) keeps a row's maximum until a tile raises it by more
// than 2^8, so most tiles' alpha is exactly 1 and the caller may skip O's rescale; probabilities
// then stay <= 256, which the 16-bit P and the fp32 sums hold exactly as well as below 1.
template <int NT, int ND, int kHalves = 2, bool kRescaleO = true, bool kLazyMax = false>
__device__ __forceinline__ void softmax_step(float (&s)[NT][4], float (&o)[ND][4], float (&m)[2], float (&l)[2],
                                             bool mask, int key0, const int (&lim)[2], float scale_log2,
                                             float (&alpha)[2]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int h = 0; h < kHalves; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        if (mask && key0 + nt * 8 + 2 * t + j >= lim[h]) s[nt][2 * h + j] = -INFINITY;
        mx = fmaxf(mx, s[nt][2 * h + j]);
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    float m_new = fmaxf(m[h], mx * scale_log2);
    if constexpr (kLazyMax)
      if (m_new - m[h] <= 8.f) m_new = m[h];  // from -inf the difference is +inf (or NaN): kept
    const float base = m_new == -INFINITY ? 0.f : m_new;
    alpha[h] = exp2_ftz(m[h] - base);
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float p = exp2_ftz(fmaf(s[nt][2 * h + j], scale_log2, -base));
        s[nt][2 * h + j] = p;
        sum += p;
      }
    l[h] = l[h] * alpha[h] + sum;
    m[h] = m_new;
    if constexpr (kRescaleO) rescale_rows(o, h, alpha[h]);
  }
}
template <int NT, int ND, int kHalves = 2>
__device__ __forceinline__ void softmax_step(float (&s)[NT][4], float (&o)[ND][4], float (&m)[2], float (&l)[2],
                                             bool mask, int key0, const int (&lim)[2], float scale_log2) {
  float alpha[2];
  softmax_step<NT, ND, kHalves, true>(s, o, m, l, mask, key0, lim, scale_log2, alpha);
}

// The probabilities of keys [16 ks, 16 ks + 16) of a softmax_step tile as the A fragment of a
// 16-key step of O += P V (two 8-key accumulator tiles make one m16n8k16 A fragment).
template <typename T, int NT>
__device__ __forceinline__ void p_frag(const float (&s)[NT][4], int ks, uint32_t (&a)[4]) {
  a[0] = pack2<T>(s[2 * ks][0], s[2 * ks][1]);
  a[1] = pack2<T>(s[2 * ks][2], s[2 * ks][3]);
  a[2] = pack2<T>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
  a[3] = pack2<T>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
}

// One warp's running attention over 16 MT query rows: unnormalised output, row maximum (of
// log2-scaled scores) and this lane's share of the row sum (the quad's four shares add up).
// Lane 4g + t holds rows g and g + 8 of each 16-row tile (index h = 0, 1).
template <typename T, int D, int MT, bool kSwz = false>
struct WarpAttn {
  float o[MT][D / 8][4];
  float m[MT][2], l[MT][2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) o[mt][nd][0] = o[mt][nd][1] = o[mt][nd][2] = o[mt][nd][3] = 0.f;
      m[mt][0] = m[mt][1] = -INFINITY;
      l[mt][0] = l[mt][1] = 0.f;
    }
  }

  // Keys [koff, koff + 8 NT) of the tile at pool position k0. With `mask`, key k0 + j is visible
  // to a row only below its limit lim[mt][h] (causal position + 1, or the split's end). The query
  // fragments come from q (kQRegs) or, fewer registers for more shared-memory reads, from the
  // warp's rows Qw of the Q tile. kHalves 1: only rows 0-7 of each 16 are real and the rest
  // zero queries (softmax_step).
  template <int NT, bool kQRegs, int kHalves = 2>
  __device__ __forceinline__ void tile(const uint32_t (&q)[MT][D / 16][4], const T* Qw, const T* Ks, const T* Vs,
                                       int koff, int k0, bool mask, const int (&lim)[MT][2], float scale_log2) {
    static_assert(NT % 2 == 0, "keys in steps of 16");
    const int lane = threadIdx.x & 31;
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
    // S = Q K^T: one ldmatrix.x4 gives two 8-key tiles' B fragments for a 16-dim step.
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qr[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (kQRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) qr[mt][i] = q[mt][kk][i];
        } else {
          const int r = mt * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
          ldmatrix_x4(qr[mt], Qw + r * ld<D>() + kk * 16 + ((lane >> 4) << 3));
        }
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t b[4];
        const int key = koff + np * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b, Ks + kv_at<D, kSwz>(key, 2 * kk + ((lane >> 3) & 1)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(s[mt][2 * np], qr[mt], b[0], b[1]);
          mma16816<T>(s[mt][2 * np + 1], qr[mt], b[2], b[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      softmax_step<NT, D / 8, kHalves>(s[mt], o[mt], m[mt], l[mt], mask, k0 + koff, lim[mt], scale_log2);
    // O += P V: the score accumulators of two 8-key tiles are the A fragment of a 16-key step;
    // ldmatrix.trans gives V's B fragments for two 8-dim tiles.
#pragma unroll
    for (int ks = 0; ks < NT / 2; ++ks) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) p_frag<T>(s[mt], ks, a[mt]);
      const int key = koff + ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, Vs + kv_at<D, kSwz>(key, 2 * dp + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(o[mt][2 * dp], a[mt], b[0], b[1]);
          mma16816<T>(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }

  // The full row sums (every lane of the quad gets them).
  __device__ __forceinline__ void reduce_l() {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        l[mt][h] += __shfl_xor_sync(0xffffffffu, l[mt][h], 1);
        l[mt][h] += __shfl_xor_sync(0xffffffffu, l[mt][h], 2);
      }
  }
};

constexpr int kMaxSplits = 64;  // key splits of one row (decode, short prefill chunks)

// Block order of the unsplit prefill kernels (their kInterleave flag; launchers.h's
// prefill_interleaves chooses). Blocks start in the grid's linear order (query tiles, KV heads,
// sequences) and take the longest query tiles first: by default those of one (sequence, KV head)
// at a time, whose K/V the blocks running together then share in L2. Small grids interleave every
// head and sequence instead, so that the last wave holds the shortest tiles of all of them rather
// than the last head's longest. H200 (docs/benchmarks/long-context.md): 1k-4k-token prompts
// 8-31% faster; with every grid interleaved, D 128 prompts of 8k-32k tokens were 3% slower (the
// blocks running together read every head's K/V). A compile-time flag, so that the one-head
// kernels stay as they were.
//
// This block's (sequence, KV head, query tile) in the interleaved order. 32-bit arithmetic: the
// launchers keep the grid below 2^31 blocks.
__device__ __forceinline__ void interleaved_block(int& b, int& kvh, int& q_tile) {
  const unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned per = gridDim.y * gridDim.z, hs = lin % per;
  b = int(hs / gridDim.y), kvh = int(hs % gridDim.y), q_tile = int(gridDim.x - 1 - lin / per);
}

// A prefill block's row r is token r / G and head r % G of the GQA group whose first q row (token
// times Hq plus head) is q_row0: its q row, the index of its Q, output and partials.
__device__ __forceinline__ size_t prefill_q_row(size_t q_row0, int r, int G, int Hq) {
  return q_row0 + size_t(r / G) * Hq + r % G;
}
// A split prefill block's partial of its row r: D unnormalised outputs, the log2-scaled maximum
// and the sum of split `split` of `splits`; a row's splits lie side by side, as merge_partials
// reads them.
template <int D>
__device__ __forceinline__ float* prefill_partial_row(float* partial, size_t q_row0, int r, int G, int Hq, int splits,
                                                      int split) {
  return partial + (prefill_q_row(q_row0, r, G, Hq) * splits + split) * (D + 2);
}
// A split whose key range is empty: neutral partials (outputs 0, maximum -inf, sum 0) of the
// block's nrows rows, written by its nthreads threads.
template <int D>
__device__ __forceinline__ void prefill_empty_partials(float* partial, size_t q_row0, int nrows, int G, int Hq,
                                                       int splits, int split, int nthreads) {
  for (int i = threadIdx.x; i < nrows * (D + 2); i += nthreads) {
    const int r = i / (D + 2), c = i % (D + 2);
    prefill_partial_row<D>(partial, q_row0, r, G, Hq, splits, split)[c] = c == D ? -INFINITY : 0.f;
  }
}

// Merges one row's split partials p[s * (D + 2) + (0..D-1 | D | D + 1)] = (unnormalised O,
// log2-scaled maximum, sum) for s < used into out[0..D) with their log-sum-exp weights; one block
// of kG x D threads, thread (g, t) summing dimension t over splits g, g + kG, ... The weights
// exp2(m_s - M) are computed once, one thread per split. A merge is a chain of dependent
// instructions a warp (H200, ncu, D 64 batch 1: 912 a warp with kG 1 at 3.4 cycles each, about
// the 1.6 us its timeline shows after the wait): kG 4 gives each thread a quarter of the loads and
// multiply-adds and sums the groups in shared memory (D 64 batch 1 under PDL 2% faster at 16k-32k).
// kN bounds `used`: the loads are unrolled to kN / kG a thread, predicated, so a merge of few splits
// (batch 4 and up) with kN 64 paid for 64.
template <typename T, int D, int kG = 1, int kN = kMaxSplits>
__device__ __forceinline__ void merge_partials(const float* p, int used, T* __restrict__ out) {
  static_assert(kG * D >= kN && kN % kG == 0 && kN <= kMaxSplits, "one thread per split, whole groups");
  constexpr int kPer = kN / kG;
  __shared__ float w[kN], red[32], acc[kG][D];
  const int i = threadIdx.x, t = kG == 1 ? i : i % D, g = kG == 1 ? 0 : i / D;
  // Every load is issued before any is used: one round trip to L2, not one per split. __ldcg, not
  // the read-only path: under PDL the kernel that writes p runs while this kernel starts, and a
  // read-only load may be scheduled above pdl_wait() once its address is known before it. Offsets
  // and bounds are constants against one base and one count a thread.
  const float* pg = p + g * (D + 2) + t;
  const int rem = used - g;
  float v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if constexpr (kG == 1)
      v[k] = k < used ? __ldcg(p + k * (D + 2) + t) : 0.f;  // as the kernel was: its SASS is unchanged
    else
      v[k] = k * kG < rem ? __ldcg(pg + k * kG * (D + 2)) : 0.f;
  const float m = i < used ? __ldcg(p + i * (D + 2) + D) : -INFINITY;
  const float l = i < used ? __ldcg(p + i * (D + 2) + D + 1) : 0.f;
  const float M = block_max(m, red);
  const float wt = m != -INFINITY ? exp2f(m - M) : 0.f;
  const float L = block_sum(l * wt, red);
  if (i < kN) w[i] = wt;
  __syncthreads();
  float A = 0.f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) A = fmaf(w[g + k * kG], v[k], A);  // w is 0 past `used`
  if constexpr (kG > 1) {
    acc[g][t] = A;
    __syncthreads();
    if (g > 0) return;
#pragma unroll
    for (int x = 1; x < kG; ++x) A += acc[x][t];
  }
  out[t] = from_f<T>(L > 0.f ? A / L : 0.f);
}

}  // namespace lite_llama::cuda::attn
