// Causal flash attention (FlashAttention-2 style, mma.sync) over packed variable-length prefill
// chunks. K/V are read from the token-level pool through the request's slot table, so a chunk
// attends to its whole prefix without any contiguous copy. Grid: (query tile x key split, KV head,
// sequence); a block's 128 rows are (token, head) pairs of one KV head's group, 32 per warp, and
// every warp runs over the same pipelined K/V tiles (attention_tile.cuh). A short chunk after a
// long prefix (the next turn of a cached chat) has too few query tiles to fill the GPU, so its
// keys are split over blocks that write (O, max, sum) partials, merged as flash-decoding does.
#include <type_traits>

#include "backends/cuda/kernels/attention_tile.cuh"
#include "backends/cuda/func_attr.h"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

using namespace attn;

// Per head dim: MT 16-row tiles per warp (32 rows halve the shared-memory reads of K and V per
// FLOP), keys per softmax step (8 NT: D = 128 takes a tile in two halves, its 32 rows x 64 keys of
// scores beside the output would spill), whether the query fragments stay in registers, and the
// K/V pipeline depth.
template <int D>
struct Cfg {
  static constexpr int kMT = 2;
  static constexpr int kNT = D <= 64 ? 8 : 4;
  static constexpr bool kQRegs = D <= 64;
  static constexpr int kStages = 2;
  static constexpr int kRows = kWarps * 16 * kMT;  // (token, head) rows per block
  static constexpr size_t kSmem = size_t(kRows) * ld<D>() * 2 + KvPipe<__half, D, kStages>::smem_bytes();
};

// Blocks of the kernel an SM holds (shared memory bound: 56 / 103 KiB a block).
constexpr int blocks_per_sm(int D) { return D <= 64 ? 4 : 2; }
static_assert((Cfg<64>::kSmem + 1024) * blocks_per_sm(64) <= 228 * 1024 &&
              (Cfg<128>::kSmem + 1024) * blocks_per_sm(128) <= 228 * 1024);

// splits > 1: the keys [0, key_end) of a block's query tile are cut into `splits` ranges of whole
// tiles; the block of split s writes its rows' partials to partial[((q row) * Hq + head) * splits
// + s] (zeros and max -inf where its range is empty), for merge_kernel.
// kSplit is a template flag so that the unsplit kernel (long prompts) keeps its registers (D 128
// sits at 255). kInterleave (unsplit only): the block order of attention_tile.cuh
// (prefill_interleaves).
template <typename T, int D, bool kSplit, bool kInterleave = false>
__global__ void __launch_bounds__(kThreads) prefill_kernel(AttnArgs a, int splits_arg, float* __restrict__ partial) {
  using C = Cfg<D>;
  constexpr int MT = C::kMT;
  extern __shared__ __align__(16) uint8_t smem[];
  T* Qs = reinterpret_cast<T*>(smem);
  uint8_t* pipe_smem = smem + size_t(C::kRows) * ld<D>() * 2;

  const int G = a.Hq / a.Hkv, tokens = C::kRows / G;
  const int splits = kSplit ? splits_arg : 1;
  static_assert(!(kSplit && kInterleave), "the interleaved order is for unsplit grids");
  int b = blockIdx.z, kvh = blockIdx.y;
  const int split = kSplit ? blockIdx.x % splits : 0;
  int q_tile = gridDim.x / splits - 1 - blockIdx.x / splits;  // the longest (last) tiles start first
  if constexpr (kInterleave) interleaved_block(b, kvh, q_tile);
  const int q_len = a.b_q_len[b], tq0 = q_tile * tokens;
  if (tq0 >= q_len) return;
  const int ntok = min(tokens, q_len - tq0), nrows = ntok * G;
  const int prefix = a.b_seq_len[b] - q_len;  // keys before the chunk's first query
  const int key_end = prefix + tq0 + ntok;     // causal: no key past the last query
  // This split's keys [beg, end); positions below count from beg.
  const int per = ((key_end + kBN - 1) / kBN + splits - 1) / splits * kBN;
  const int beg = split * per, end = min(key_end, beg + per);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const size_t q_row0 = size_t(a.b_q_start[b] + tq0) * a.Hq + size_t(kvh) * G;
  if (kSplit && beg >= end) {  // an empty range: a neutral partial for the merge
    prefill_empty_partials<D>(partial, q_row0, nrows, G, a.Hq, splits, split, kThreads);
    return;
  }
  const int n = end - beg;
  const int mask_from = min(prefix + tq0, end) - beg;  // keys below are visible to every row
  KvPipe<T, D, C::kStages> pipe{reinterpret_cast<T*>(pipe_smem),
                                reinterpret_cast<int32_t*>(pipe_smem + KvPipe<T, D, C::kStages>::kv_bytes()),
                                a.req_to_slot + size_t(a.b_req_idx[b]) * a.req_stride + beg,
                                static_cast<const T*>(a.k_pool),
                                static_cast<const T*>(a.v_pool),
                                a.Hkv,
                                kvh,
                                n,
                                (n + kBN - 1) / kBN};

  // Q rows (the group's heads are adjacent in q), zeros past the chunk, in the pipeline's first
  // commit group.
  const T* qb = static_cast<const T*>(a.q);
  for (int i = threadIdx.x; i < C::kRows * (D / 8); i += kThreads) {
    const int r = i / (D / 8), c = i % (D / 8);
    const bool ok = r < nrows;
    cp_async16(Qs + r * ld<D>() + c * 8, ok ? qb + prefill_q_row(q_row0, r, G, a.Hq) * D + c * 8 : qb, ok);
  }
  pipe.start();

  const T* Qw = Qs + warp * 16 * MT * ld<D>();
  uint32_t q[MT][D / 16][4];
  if constexpr (C::kQRegs) load_q_frags<T, D, MT>(q, Qs, warp * 16 * MT);
  int lim[MT][2];
  const int g = lane >> 2;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 * MT + mt * 16 + g + 8 * h;
      lim[mt][h] = (r < nrows ? min(prefix + tq0 + r / G + 1, end) : end) - beg;
    }
  WarpAttn<T, D, MT> w;
  w.init();
  const float scale_log2 = a.scale * 1.4426950408889634f;
  for (int j = 0; j < pipe.ntiles; ++j) {
    pipe.wait(j);
    const int k0 = j * kBN;
#pragma unroll 1
    for (int koff = 0; koff < kBN; koff += 8 * C::kNT)
      w.template tile<C::kNT, C::kQRegs>(q, Qw, pipe.K(j), pipe.V(j), koff, k0, k0 + kBN > mask_from, lim,
                                         scale_log2);
  }

  w.reduce_l();
  const int t = lane & 3;
  if constexpr (kSplit) {  // this split's unnormalised rows, maxima and sums
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warp * 16 * MT + mt * 16 + g + 8 * h;
        if (r >= nrows) continue;
        float* prow = prefill_partial_row<D>(partial, q_row0, r, G, a.Hq, splits, split);
#pragma unroll
        for (int nd = 0; nd < D / 8; ++nd)
          *reinterpret_cast<float2*>(prow + nd * 8 + 2 * t) = make_float2(w.o[mt][nd][2 * h], w.o[mt][nd][2 * h + 1]);
        if (t == 0) prow[D] = w.m[mt][h], prow[D + 1] = w.l[mt][h];
      }
    return;
  }
  // Normalise and write this lane's rows.
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 * MT + mt * 16 + g + 8 * h;
      if (r >= nrows) continue;
      const float inv = w.l[mt][h] > 0.f ? 1.f / w.l[mt][h] : 0.f;
      T* orow = out + prefill_q_row(q_row0, r, G, a.Hq) * D + 2 * t;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd)
        *reinterpret_cast<uint32_t*>(orow + nd * 8) =
            pack2<T>(w.o[mt][nd][2 * h] * inv, w.o[mt][nd][2 * h + 1] * inv);
    }
}

// One block of D threads per (query token, head, sequence): the token's split partials, merged.
template <typename T, int D>
__global__ void __launch_bounds__(D) merge_kernel(AttnArgs a, int splits, const float* __restrict__ partial) {
  const int b = blockIdx.z, h = blockIdx.y, tq = blockIdx.x;
  if (tq >= a.b_q_len[b]) return;
  const size_t row = size_t(a.b_q_start[b] + tq) * a.Hq + h;
  merge_partials<T, D>(partial + row * splits * (D + 2), splits, static_cast<T*>(a.out) + row * D);
}

template <typename T, int D>
cudaError_t launch(const AttnArgs& a, int splits, float* partial, cudaStream_t s) {
  using C = Cfg<D>;
  const int G = a.Hq / a.Hkv;
  if (G < 1 || G > C::kRows || a.Hq % a.Hkv != 0) return cudaErrorInvalidValue;
  auto* kernel = splits > 1 ? prefill_kernel<T, D, true>
                 : prefill_interleaves(a.max_seq_len, a.num_seqs, a.Hkv, D) ? prefill_kernel<T, D, false, true>
                                                                            : prefill_kernel<T, D, false>;
  cudaError_t e = set_func_attr(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmem));
  if (e != cudaSuccess) return e;
  const dim3 grid(ceil_div(a.max_q_len, C::kRows / G) * splits, a.Hkv, a.num_seqs);
  kernel<<<grid, kThreads, C::kSmem, s>>>(a, splits, partial);
  e = cudaGetLastError();
  return e == cudaSuccess && splits > 1 ? attention_prefill_merge(a, splits, partial, s, std::is_same_v<T, __nv_bfloat16>)
                                        : e;
}

}  // namespace

cudaError_t attention_prefill_merge(const AttnArgs& a, int splits, const float* partial, cudaStream_t s, bool bf16) {
  const dim3 grid(a.max_q_len, a.Hq, a.num_seqs);
  switch (a.D) {
    case 64:
      bf16 ? merge_kernel<__nv_bfloat16, 64><<<grid, 64, 0, s>>>(a, splits, partial)
           : merge_kernel<__half, 64><<<grid, 64, 0, s>>>(a, splits, partial);
      break;
    case 128:
      bf16 ? merge_kernel<__nv_bfloat16, 128><<<grid, 128, 0, s>>>(a, splits, partial)
           : merge_kernel<__half, 128><<<grid, 128, 0, s>>>(a, splits, partial);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

int prefill_splits(const AttnArgs& a, int num_tokens, int num_sms, int max_rows, bool wgmma, bool wgmma_split) {
  const int G = a.Hq / a.Hkv;
  const int rows = a.D <= 64 ? Cfg<64>::kRows : Cfg<128>::kRows;
  if (G < 1 || G > rows || a.num_seqs == 0) return 1;
  if (wgmma && attention_prefill_sm90_built()) {
    // A chunk after a long prefix: the wgmma kernel does an SM's work about twice as fast, so its
    // unsplit grid wins once it holds half a wave (H200, 384-768 tokens after 8k-32k cached keys:
    // 1.35-2.1x faster than split mma.sync; about even at 256 tokens; long-context.md).
    const long blocks = attention_prefill_sm90_blocks(a);
    if (2 * blocks >= num_sms) return 1;
    // Shorter chunks split their keys over wgmma blocks (one an SM): about one wave, at least
    // kSm90MinSplitKeys a split.
    if (wgmma_split && blocks > 0) {
      const long splits = std::min<long>({num_sms / blocks, a.max_seq_len / kSm90MinSplitKeys,
                                          max_rows / std::max(1, num_tokens), kMaxSplits});
      return int(std::max<long>(1, splits));
    }
  }
  const long blocks = prefill_grid_blocks(a, rows);
  const int wave = blocks_per_sm(a.D) * num_sms;
  if (2 * blocks > wave) return 1;  // half a wave or more without splitting
  // About one wave, at least 4 tiles of keys a split, partials within max_rows (token, split)
  // pairs a head.
  long splits = std::min<long>(wave / blocks, a.max_seq_len / (4 * kBN));
  splits = std::min<long>({splits, max_rows / std::max(1, num_tokens), kMaxSplits});
  return int(std::max<long>(1, splits));
}

cudaError_t attention_prefill(Act act, const AttnArgs& a, int splits, float* partial, cudaStream_t s, bool wgmma,
                              int wg3_waves, int num_sms, bool wgmma_split) {
  if (a.num_seqs == 0 || a.max_q_len == 0) return cudaSuccess;
  if (splits < 1 || splits > kMaxSplits || (splits > 1 && partial == nullptr)) return cudaErrorInvalidValue;
  if (wgmma && (splits == 1 || wgmma_split) && attention_prefill_sm90_built())
    return attention_prefill_sm90(act, a, splits, partial, s, wg3_waves, num_sms);
  const bool bf = act == Act::BF16;
  switch (a.D) {
    case 64: return bf ? launch<__nv_bfloat16, 64>(a, splits, partial, s) : launch<__half, 64>(a, splits, partial, s);
    case 128: return bf ? launch<__nv_bfloat16, 128>(a, splits, partial, s) : launch<__half, 128>(a, splits, partial, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace lite_llama::cuda
