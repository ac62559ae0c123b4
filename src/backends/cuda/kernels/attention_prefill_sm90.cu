// Causal flash attention of long prefill chunks on Hopper (sm_90a): wgmma instead of mma.sync. A
// block's rows are (token, head) pairs of one KV head's group (GQA without repeat_kv), 64 per
// warpgroup (two warpgroups; three at D 64 on grids of 3 waves or more); every tile of 128 keys is
// gathered from the token-level pool through the slot table by cp.async into a 128-byte-swizzled
// ring of three (K, V) stages, S = Q K^T runs with both operands in shared memory, the online softmax on S's
// accumulators in registers, and O += P V with P from registers and V in shared memory (read
// transposed by the hardware). As in FlashAttention-3, a warpgroup steps tile j's softmax while its
// P_{j-1} V_{j-1} runs; as in FlashAttention-4, row maxima are updated lazily, so O is rescaled
// only on the tiles that raise a row's maximum by more than 2^8. One __syncthreads a tile: the load
// of tile j + 1 is issued right after tile j has landed, its slot ids loaded a tile earlier into
// registers. A short chunk after a long prefix (the next turn of a chat), whose grid here would
// fill less than half the SMs, has its keys split over blocks (kSplit, prefill_splits); their
// partials are merged by the mma.sync file's merge kernel.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/attention_tile.cuh"
#include "backends/cuda/func_attr.h"
#include "backends/cuda/launchers.h"
#include "backends/cuda/mma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kBN = 128;  // keys a tile
// A tile's scores are stepped while the previous tile's P V runs on the tensor cores, which keeps
// V one tile longer: three (K, V) stages.
// WG warpgroups of 64 rows. Three at D 64, as FlashAttention-3 tiles head dim 64, where the grid
// holds enough blocks (CudaTuning::prefill_wg3_waves): 12 warps an SM hide more latency than 8
// (167 registers). D 128 needs 254 registers a thread, so only two fit.
template <int D, int WG>
struct Sm90Cfg {
  static constexpr int kWG = WG;
  static constexpr int kBM = 64 * kWG;  // (token, head) rows a block: 64 a warpgroup
  static constexpr int kThreads = 128 * kWG;
  static constexpr int kStages = 3;
  static constexpr int kQBytes = kBM * D * 2;
  static constexpr int kTileBytes = kBN * D * 2;  // one K or V tile
  static constexpr size_t kSmem = 1024 + kQBytes + 2 * kStages * size_t(kTileBytes);  // align + Q + (K, V) stages
};
static_assert(Sm90Cfg<128, 2>::kSmem <= 227 * 1024 && Sm90Cfg<64, 3>::kSmem <= 227 * 1024,
              "three stages fit an SM");

// kSplit: a block steps split (blockIdx.x % splits) of its query tile's key tiles, whole 128-key
// tiles each, and writes its rows' unnormalised (O, max, sum) to partial[((q row) * Hq + head) *
// splits + split] (a neutral partial where its range is empty), as the mma.sync kernel does.
template <typename T, int D, int WG, bool kInterleave, bool kSplit = false>
__global__ void __launch_bounds__(Sm90Cfg<D, WG>::kThreads, 1)
    prefill_sm90_kernel(AttnArgs a, int splits_arg, float* __restrict__ partial) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = Sm90Cfg<D, WG>;
  constexpr int kBM = C::kBM, kThreads = C::kThreads;
  constexpr int kChunks = D / 8;                  // 16-byte chunks a row
  constexpr int kRowStep = kThreads / kChunks;    // rows apart of a thread's copies
  constexpr int kRowsPerThread = (kBN + kRowStep - 1) / kRowStep;  // K (and V) rows a thread copies
  constexpr bool kRagged = kBN % kRowStep != 0;  // 384 threads at D 64: some copy one row fewer
  constexpr bool kBf = std::is_same_v<T, __nv_bfloat16>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(smem_raw));
  const uint32_t pad = ((raw + 1023u) & ~1023u) - raw;  // swizzled tiles start 1024-aligned
  uint8_t* sm = smem_raw + pad;
  const uint32_t sQ = raw + pad, sKV = sQ + C::kQBytes;

  const int G = a.Hq / a.Hkv, tokens = kBM / G;
  static_assert(!(kSplit && kInterleave), "the interleaved order is for unsplit grids");
  const int splits = kSplit ? splits_arg : 1, split = kSplit ? blockIdx.x % splits : 0;
  // The longest query tiles first, of one head or of all (attention_tile.cuh, prefill_interleaves).
  int b = blockIdx.z, kvh = blockIdx.y, q_tile = gridDim.x / splits - 1 - blockIdx.x / splits;
  if constexpr (kInterleave) attn::interleaved_block(b, kvh, q_tile);
  const int q_len = a.b_q_len[b], tq0 = q_tile * tokens;
  if (tq0 >= q_len) return;
  const int ntok = min(tokens, q_len - tq0), nrows = ntok * G;
  const int prefix = a.b_seq_len[b] - q_len;
  const int key_end = prefix + tq0 + ntok;  // causal: no key past the last query
  const int mask_from = prefix + tq0;       // keys below are visible to every row
  // This block's key tiles [j0, j1): all of them, or one split's share.
  int j0 = 0, j1 = (key_end + kBN - 1) / kBN;
  if constexpr (kSplit) {
    const int per = (j1 + splits - 1) / splits;
    j0 = split * per, j1 = min(j1, j0 + per);
  }
  const int32_t* slots = a.req_to_slot + size_t(a.b_req_idx[b]) * a.req_stride;
  const size_t q_row0 = size_t(a.b_q_start[b] + tq0) * a.Hq + size_t(kvh) * G;
  const T* kp = static_cast<const T*>(a.k_pool);
  const T* vp = static_cast<const T*>(a.v_pool);
  const int tid = threadIdx.x;
  if (kSplit && j0 >= j1) {  // an empty range: a neutral partial for the merge
    attn::prefill_empty_partials<D>(partial, q_row0, nrows, G, a.Hq, splits, split, kThreads);
    return;
  }

  // Q rows (zeros past the chunk).
  const T* qb = static_cast<const T*>(a.q);
  for (int i = tid; i < kBM * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = r < nrows;
    cp_async16(sm + wg::swz(r, c, kBM), ok ? qb + attn::prefill_q_row(q_row0, r, G, a.Hq) * D + c * 8 : qb, ok);
  }
  // This thread copies chunk c of rows r0 + k * kRowStep of every K and V tile. At D 64 a row's
  // source is one 32 x 32 + 64-bit multiply-add from the thread's base, and its destination a
  // constant step from the thread's first row (kRowStep is a multiple of 8, so all its rows share
  // one swizzle); the MMA descriptors are a base plus an offset. Computed per row in 64 bits, with
  // descriptors packed per operand, a tile's loop took 10% more instructions, and the kernel 6%
  // longer (H200, 2k-32k tokens). D 128 keeps that form: there the cheaper one made it 3-6% slower
  // at 8k-16k (243 registers instead of 254, scheduled differently; not profiled).
  constexpr bool kCheap = D == 64;
  static_assert(kRowStep % 8 == 0, "a thread's rows share their swizzle");
  const int c = tid % kChunks, r0 = tid / kChunks;
  const uint32_t row_bytes = uint32_t(a.Hkv) * D * sizeof(T);
  const uint64_t k_src = reinterpret_cast<uint64_t>(kp + kvh * D + c * 8);
  const uint64_t v_src = reinterpret_cast<uint64_t>(vp + kvh * D + c * 8);
  const uint32_t dst0 = sKV + wg::swz(r0, c, kBN);
  int ids[kRowsPerThread];  // slot ids of the next tile to issue (-1: past key_end)
  auto load_ids = [&](int tile) {
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      const int key = tile * kBN + r0 + k * kRowStep;
      ids[k] = key < key_end && (!kRagged || r0 + k * kRowStep < kBN) ? __ldg(slots + key) : -1;
    }
  };
  auto issue = [&](int tile) {  // rows past key_end are zeros: 0 * a masked probability stays 0
    if constexpr (!kCheap) {
      uint8_t* k_dst = sm + C::kQBytes + (tile % C::kStages) * 2 * C::kTileBytes;
#pragma unroll
      for (int k = 0; k < kRowsPerThread; ++k) {
        const int r = r0 + k * kRowStep;
        if (kRagged && r >= kBN) break;
        const bool ok = ids[k] >= 0;
        const size_t off = ok ? (size_t(ids[k]) * a.Hkv + kvh) * D + c * 8 : 0;
        const uint32_t o = wg::swz(r, c, kBN);
        cp_async16(k_dst + o, kp + off, ok);
        cp_async16(k_dst + C::kTileBytes + o, vp + off, ok);
      }
      return;
    }
    const uint32_t dst = dst0 + (tile % C::kStages) * 2 * C::kTileBytes;
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      if (kRagged && r0 + k * kRowStep >= kBN) break;
      const uint32_t id = uint32_t(max(ids[k], 0));
      const uint32_t o = dst + k * kRowStep * 128;
      cp_async16_zfill(o, mad_wide(id, row_bytes, k_src), ids[k]);
      cp_async16_zfill(o + C::kTileBytes, mad_wide(id, row_bytes, v_src), ids[k]);
    }
  };
  load_ids(j0);
  issue(j0);
  cp_async_commit();
  if (j1 > j0 + 1) load_ids(j0 + 1);

  const int wgi = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
  int lim[2];  // keys [0, lim) visible to this thread's rows g and g + 8
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = wgi * 64 + warp * 16 + g + 8 * h;
    lim[h] = r < nrows ? min(prefix + tq0 + r / G + 1, key_end) : key_end;
  }
  float o[D / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  const float scale_log2 = a.scale * 1.4426950408889634f;
  // kCheap: descriptors as a base plus the operand's offset >> 4, in the address field, which does
  // not overflow below 256 KiB of shared memory.
  const uint32_t q_addr = sQ + wgi * 64 * 128;
  const uint64_t q_desc = wg::desc(q_addr, 16, 1024);

  // Tile j landed for every thread, every warpgroup is done with what tile j + 1's stage held, and
  // tile j + 1 is requested (its slot ids loaded a tile earlier).
  auto next_tile = [&](int j) {
    cp_async_wait<0>();
    wg::fence_async_smem();
    __syncthreads();
    if (j + 1 < j1) issue(j + 1);
    cp_async_commit();
    if (j + 2 < j1) load_ids(j + 2);
  };
  auto k_smem = [&](int j) { return sKV + (j % C::kStages) * 2 * C::kTileBytes; };
  // S = Q K_j^T (64 rows x 128 keys a warpgroup), issued and committed, not awaited.
  auto issue_s = [&](float (&s)[kBN / 8][4], int j) {
    wg::fence();
    const uint64_t k_desc = wg::desc(k_smem(j), 16, 1024);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk & 3) * 32;  // 16 columns into the 64-column block
      const uint32_t qo = (kk >> 2) * kBM * 128 + koff, ko = (kk >> 2) * kBN * 128 + koff;
      const uint64_t ad = kCheap ? q_desc + (qo >> 4) : wg::desc(q_addr + qo, 16, 1024);
      const uint64_t bd = kCheap ? k_desc + (ko >> 4) : wg::desc(k_smem(j) + ko, 16, 1024);
      if (kk == 0)
        wg::mma_ss<kBf, kBN, true>(s, ad, bd, 0);
      else
        wg::mma_ss<kBf, kBN>(s, ad, bd, 1);
    }
    wg::commit();
  };
  // O += P V_j: P's 16-key steps are the A fragments, V (keys x D) the MN-major B operand; issued
  // and committed, not awaited.
  auto issue_pv = [&](const uint32_t (&pa)[kBN / 16][4], int j) {
    const uint64_t v_desc = wg::desc(k_smem(j) + C::kTileBytes, kBN * 128, 1024);
    wg::fence_regs(o);
    wg::fence();
#pragma unroll
    for (int ks = 0; ks < kBN / 16; ++ks)
      wg::mma_rs<kBf, D>(o, pa[ks],
                         kCheap ? v_desc + ((ks * 16 * 128) >> 4)
                                : wg::desc(k_smem(j) + C::kTileBytes + ks * 16 * 128, kBN * 128, 1024),
                         1);
    wg::commit();
  };

  // FlashAttention-3's intra-warpgroup overlap: tile j's scores are stepped (exp on the SFU)
  // while P_{j-1} V_{j-1} runs; O takes the rescale factor once that product is done.
  uint32_t pa[kBN / 16][4];
  for (int j = j0; j < j1; ++j) {
    next_tile(j);
    float s[kBN / 8][4];
    issue_s(s, j);
    if (j > j0) {
      issue_pv(pa, j - 1);
      wg::wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
    } else {
      wg::wait<0>();
    }
    wg::fence_regs(s);
    float alpha[2];
    if (j * kBN + kBN > mask_from)  // two copies: the mask's compares only where it can hide keys
      attn::softmax_step<kBN / 8, D / 8, 2, false, true>(s, o, m, l, true, j * kBN, lim, scale_log2, alpha);
    else
      attn::softmax_step<kBN / 8, D / 8, 2, false, true>(s, o, m, l, false, j * kBN, lim, scale_log2, alpha);
    wg::wait<0>();
    wg::fence_regs(o);
    // Lazy maxima: O's rescale only where a row of this warp's moved (H200, bf16, 8k-32k tokens:
    // D 128 3.3-4.1% faster, D 64 0.2-0.5%).
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
      attn::rescale_rows(o, 0, alpha[0]);
      attn::rescale_rows(o, 1, alpha[1]);
    }
#pragma unroll
    for (int ks = 0; ks < kBN / 16; ++ks) attn::p_frag<T>(s, ks, pa[ks]);
  }
  issue_pv(pa, j1 - 1);
  wg::wait<0>();
  wg::fence_regs(o);

  // Full row sums, then this split's unnormalised rows, maxima and sums, or the normalised rows.
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    const int r = wgi * 64 + warp * 16 + g + 8 * h;
    if (r >= nrows) continue;
    if constexpr (kSplit) {
      float* prow = attn::prefill_partial_row<D>(partial, q_row0, r, G, a.Hq, splits, split);
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
        *reinterpret_cast<float2*>(prow + i * 8 + 2 * t) = make_float2(o[i][2 * h], o[i][2 * h + 1]);
      if (t == 0) prow[D] = m[h], prow[D + 1] = l[h];
      continue;
    }
    const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
    T* orow = out + attn::prefill_q_row(q_row0, r, G, a.Hq) * D + 2 * t;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      *reinterpret_cast<uint32_t*>(orow + i * 8) = pack2<T>(o[i][2 * h] * inv, o[i][2 * h + 1] * inv);
  }
#else
  __trap();  // launched only where sm_90a code was built (attention_prefill_sm90_built)
#endif
}

template <typename T, int D, int WG>
cudaError_t launch(const AttnArgs& a, int splits, float* partial, cudaStream_t s) {
  using C = Sm90Cfg<D, WG>;
  const int G = a.Hq / a.Hkv;
  if (G < 1 || G > C::kBM || a.Hq % a.Hkv != 0) return cudaErrorInvalidValue;
  constexpr size_t smem = C::kSmem;
  auto* kernel = prefill_interleaves(a.max_seq_len, a.num_seqs, a.Hkv, D) ? prefill_sm90_kernel<T, D, WG, true>
                                                                         : prefill_sm90_kernel<T, D, WG, false>;
  if (splits > 1) {  // split grids are small: two warpgroups
    if constexpr (WG == 2)
      kernel = prefill_sm90_kernel<T, D, WG, false, true>;
    else
      return cudaErrorInvalidValue;
  }
  cudaError_t e = set_func_attr(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(ceil_div(a.max_q_len, C::kBM / G) * splits, a.Hkv, a.num_seqs);
  if (double(grid.x) * grid.y * grid.z >= 2147483648.0) return cudaErrorInvalidValue;
  kernel<<<grid, C::kThreads, smem, s>>>(a, splits, partial);
  e = cudaGetLastError();
  return e == cudaSuccess && splits > 1 ? attention_prefill_merge(a, splits, partial, s, std::is_same_v<T, __nv_bfloat16>) : e;
}

}  // namespace

long attention_prefill_sm90_blocks(const AttnArgs& a) {
  static_assert(Sm90Cfg<128, 2>::kBM == Sm90Cfg<64, 2>::kBM, "one row count for both head dims");
  return prefill_grid_blocks(a, Sm90Cfg<64, 2>::kBM);
}

bool attention_prefill_sm90_built() {
#if defined(LITE_LLAMA_SM90A)
  return true;
#else
  return false;
#endif
}

cudaError_t attention_prefill_sm90(Act act, const AttnArgs& a, int splits, float* partial, cudaStream_t s,
                                   int wg3_waves, int num_sms) {
  if (a.num_seqs == 0 || a.max_q_len == 0) return cudaSuccess;
  if (!attention_prefill_sm90_built()) return cudaErrorNotSupported;
  if (splits < 1 || splits > attn::kMaxSplits || (splits > 1 && partial == nullptr)) return cudaErrorInvalidValue;
  const bool bf = act == Act::BF16;
  switch (a.D) {
    case 64: {  // three warpgroups where their unsplit grid fills wg3_waves waves of one block an SM
      if (num_sms < 1) return cudaErrorInvalidValue;
      if (splits == 1 && prefill_grid_blocks(a, Sm90Cfg<64, 3>::kBM) >= long(std::max(0, wg3_waves)) * num_sms)
        return bf ? launch<__nv_bfloat16, 64, 3>(a, 1, nullptr, s) : launch<__half, 64, 3>(a, 1, nullptr, s);
      return bf ? launch<__nv_bfloat16, 64, 2>(a, splits, partial, s) : launch<__half, 64, 2>(a, splits, partial, s);
    }
    case 128:
      return bf ? launch<__nv_bfloat16, 128, 2>(a, splits, partial, s) : launch<__half, 128, 2>(a, splits, partial, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace lite_llama::cuda
