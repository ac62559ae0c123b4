// Flash-decoding for sequences with one new query token, on tensor cores. Grid: (KV split, KV
// head [x 16-head chunk], sequence). A block's 16 rows are the query heads of one KV head's group
// (zero rows pad smaller groups), so each split's keys and values are read once, through the
// request's slot table, for the whole group (GQA without repeat_kv); its 4 warps take a quarter of
// every 64-key tile each (attention_tile.cuh) and combine in shared memory. A second kernel merges
// the splits with their log-sum-exp weights. The grid depends only on the batch size and
// max_seq_len, so one CUDA graph serves every sequence length: lengths come from device memory,
// and a sequence uses the first ceil(len / keys_per_split) splits of its grid row.
#include "backends/cuda/kernels/attention_tile.cuh"
#include "backends/cuda/kernels/decode_timeline.cuh"
#include "backends/cuda/func_attr.h"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

using namespace attn;

// Keys per split of a sequence: spread over all `splits`, but at least `min_keys` (0: no floor),
// so short sequences use fewer, fuller splits. The merge derives the same count.
__device__ __forceinline__ int keys_per_split(int seq_len, int splits, int min_keys) {
  return max(min_keys, (seq_len + splits - 1) / splits);
}
__device__ __forceinline__ int used_splits(int seq_len, int per) {
  return per > 0 ? (seq_len + per - 1) / per : 0;
}

// Split sequences (small batches) take three stages at D 128 and four at D 64 (two or three tiles
// in flight per block): their bandwidth depends on the bytes in flight per SM (H100, Llama-3.2-1B
// at 32k, batch 1: four stages make the step 1.576 -> 1.538 ms). Unsplit ones (large batches, a
// grid of several waves) take two, which fits more blocks per SM (H100: 0.78 -> 0.90 of copy at
// batch 64, D 64).
// The query tile lives in the ring's last K buffer, which the first wait() is the first to fill:
// the queries are in registers by then.
template <int D, int S>
constexpr size_t decode_smem_bytes() {
  return KvPipe<__half, D, S, true>::smem_bytes();
}
// Blocks of the split kernel an SM holds (shared memory bound); splits fill one wave. D 64: three
// with four stages (three tiles in flight a block: CudaTuning::decode_stages), four with three.
// D 128 always takes three.
constexpr int blocks_per_sm(int D, int stages) { return D <= 64 ? (stages >= 4 ? 3 : 4) : 2; }
// sm_90: 228 KiB of shared memory an SM, 1 KiB of it reserved per block.
static_assert((decode_smem_bytes<64, 4>() + 1024) * blocks_per_sm(64, 4) <= 228 * 1024 &&
              (decode_smem_bytes<64, 3>() + 1024) * blocks_per_sm(64, 3) <= 228 * 1024 &&
              (decode_smem_bytes<128, 3>() + 1024) * blocks_per_sm(128, 3) <= 228 * 1024);
// The most split blocks an SM holds at any stage count: the workspace's bound.
constexpr int max_blocks_per_sm(int D) { return blocks_per_sm(D, 3); }

// The warps' combine reuses the ring: maxima, sums and O rows of D + 8 floats.
static_assert(kWarps * 16 * (2 + 64 + 8) * 4 <= decode_smem_bytes<64, 2>() &&
              kWarps * 16 * (2 + 128 + 8) * 4 <= decode_smem_bytes<128, 2>());

static_assert(16 * (64 / 8) % kThreads == 0 && 16 * (128 / 8) % kThreads == 0, "whole Q chunks per thread");

template <typename T, int D, int kStages>
__global__ void __launch_bounds__(kThreads) decode_kernel(AttnArgs a, int splits, int min_keys, int hchunks,
                                                          float* __restrict__ partial) {
  TL_BEGIN;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* pipe_smem = smem;
  using Pipe = KvPipe<T, D, kStages, true>;
  static_assert(16 * ld<D>() <= Pipe::kTile, "the Q tile fits a K buffer");
  T* Qs = reinterpret_cast<T*>(pipe_smem) + size_t(2 * (kStages - 1)) * Pipe::kTile;  // K(kStages - 1)

  const int b = blockIdx.z, split = blockIdx.x;
  const int kvh = blockIdx.y / hchunks, hc = blockIdx.y % hchunks;
  const int G = a.Hq / a.Hkv;
  const int h0 = kvh * G + hc * 16, nh = min(16, G - hc * 16);
  // The step's metadata (uploaded before it, written by no kernel) in one trip: as written before,
  // the PTX loaded the request row only after the early return below and the query row only after
  // pdl_wait(), one more round trip each before the slot ids and the queries (H100, D 64, batch 1,
  // 8k keys, PDL: 11.6 -> 10.9 us a call).
  const int seq_len = a.b_seq_len[b], req = a.b_req_idx[b], q_start = a.b_q_start[b];
  const int2 run = a.b_kv_runs ? reinterpret_cast<const int2*>(a.b_kv_runs)[b] : make_int2(0, 0);
  asm volatile("" ::"r"(req), "r"(q_start), "r"(run.x), "r"(run.y));
  const int per = keys_per_split(seq_len, splits, min_keys);
  const int beg = split * per, end = min(seq_len, beg + per);
  if (beg >= seq_len) return;  // an unused split: the merge reads only the used ones
  const int n = end - beg;     // key positions below count from the split's first key
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  Pipe pipe{reinterpret_cast<T*>(pipe_smem),
            reinterpret_cast<int32_t*>(pipe_smem + Pipe::kv_bytes()),
            a.req_to_slot + size_t(req) * a.req_stride + beg,
            static_cast<const T*>(a.k_pool),
            static_cast<const T*>(a.v_pool),
            a.Hkv,
            kvh,
            n,
            (n + kBN - 1) / kBN};
  // A split inside the sequence's contiguous run computes its rows' addresses: the metadata trip,
  // then the K/V, with no slot-id trip between (H200, attention-bench under PDL: D 64 batch 1 at
  // 8k / 16k / 32k 8.9 / 12.4 / 20.0 -> 8.3 / 12.0 / 19.6 us, D 128 at 8k 13.0 -> 12.6).
  if (end <= run.y) pipe.base = run.x + beg;

  // With PDL this block may run beside the RoPE + KV write kernel before it: keys older than the
  // new token (slot table, pool rows of earlier steps) are final, so the ring starts on them; the
  // query and the new key (the last one, seq_len - 1) are read only after pdl_wait(). Only tile 0
  // is requested before the queries: a load returns after the bytes its SM asked for before it
  // (H100 timeline of a Llama-3.2-1B step at 8k: queries 3.5 us after the wait behind three
  // tiles, 3.0 behind one; its calls end 0.8 us sooner, the 32k step 1.503 -> 1.484 ms). The
  // split holding the new key waits first only where that key is in tile 0: waiting before its
  // slot ids and tile 0 made it the call's last block to end (H200 timelines, D 64 at 32k keys
  // and D 128 at 16k: ~0.8 us after every other split).
  const bool new_key = end == seq_len, wait_first = new_key && n <= kBN;
  if (wait_first) pdl_wait();
  pipe.start(1);
  TL_MARK(1);
  if (!wait_first) pdl_wait();
  TL_MARK(2);
  const T* qb = static_cast<const T*>(a.q) + (size_t(q_start) * a.Hq + h0) * D;
  constexpr int kQChunks = 16 * (D / 8) / kThreads;  // 16-byte chunks of the Q tile per thread
  uint4 qv[kQChunks];
#pragma unroll
  for (int k = 0; k < kQChunks; ++k) {
    const int i = threadIdx.x + k * kThreads, r = i / (D / 8), c = i % (D / 8);
    qv[k] = r < nh ? *reinterpret_cast<const uint4*>(qb + r * D + c * 8) : make_uint4(0, 0, 0, 0);
  }
  pipe.start_rest(1);
#pragma unroll
  for (int k = 0; k < kQChunks; ++k) {
    const int i = threadIdx.x + k * kThreads, r = i / (D / 8), c = i % (D / 8);
    *reinterpret_cast<uint4*>(Qs + r * ld<D>() + c * 8) = qv[k];
  }
  __syncthreads();
  TL_MARK(3);

  uint32_t q[1][D / 16][4];
  load_q_frags<T, D, 1>(q, Qs, 0);
  const int lim[1][2] = {{n, n}};
  WarpAttn<T, D, 1, true> w;
  w.init();
  const float scale_log2 = a.scale * 1.4426950408889634f;
  // With at most 8 query heads (every model here: G 3-8) rows 8-15 are zero queries, and the
  // softmax skips them (H100, D 64, 8k keys, batch 1, with the padded combine below: 12.6 -> 11.7
  // us a call under PDL).
  const bool half = nh <= 8;
  for (int j = 0; j < pipe.ntiles; ++j) {
    pipe.wait(j);
    if (j == 0) TL_MARK(4);
    const int k0 = j * kBN;
    if (half)
      w.template tile<2, true, 1>(q, Qs, pipe.K(j), pipe.V(j), warp * 16, k0, k0 + kBN > n, lim, scale_log2);
    else
      w.template tile<2, true>(q, Qs, pipe.K(j), pipe.V(j), warp * 16, k0, k0 + kBN > n, lim, scale_log2);
  }

  // Combine the warps' key quarters: per warp and row (m, l, O) in shared memory over the tiles.
  w.reduce_l();
  TL_MARK(5);
  pdl_trigger();  // the merge, or without one the output projection (PDL), may start
  cp_async_wait<0>();
  __syncthreads();
  float* cm = reinterpret_cast<float*>(pipe_smem);  // [warp][16] maxima, then sums, then O [warp][16][D + 8]
  float* cl = cm + kWarps * 16;
  float* co = cl + kWarps * 16;
  const int g = lane >> 2, t = lane & 3;
  // Rows padded to D + 8 floats: a half-warp's float2 stores (rows g, pairs t) hit 16 distinct
  // bank pairs, where rows of D floats put all 8 rows g in one bank.
  constexpr int ldo = D + 8;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (h == 1 && half) break;
    const int r = g + 8 * h;
    if (t == 0) cm[warp * 16 + r] = w.m[0][h], cl[warp * 16 + r] = w.l[0][h];
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      *reinterpret_cast<float2*>(co + (warp * 16 + r) * ldo + nd * 8 + 2 * t) =
          make_float2(w.o[0][nd][2 * h], w.o[0][nd][2 * h + 1]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nh * D; i += kThreads) {
    const int r = i / D, d = i % D;
    float M = -INFINITY;
#pragma unroll
    for (int x = 0; x < kWarps; ++x) M = fmaxf(M, cm[x * 16 + r]);
    float L = 0.f, A = 0.f;
    if (M != -INFINITY) {
#pragma unroll
      for (int x = 0; x < kWarps; ++x) {
        const float wt = exp2f(cm[x * 16 + r] - M);
        L += cl[x * 16 + r] * wt;
        A += co[(x * 16 + r) * ldo + d] * wt;
      }
    }
    if (splits == 1) {  // the whole sequence in this block: no merge
      static_cast<T*>(a.out)[(size_t(q_start) * a.Hq + h0 + r) * D + d] = from_f<T>(L > 0.f ? A / L : 0.f);
      continue;
    }
    float* out = partial + ((size_t(b) * a.Hq + h0 + r) * splits + split) * (D + 2);
    out[d] = A;
    if (d == 0) out[D] = M, out[D + 1] = L;
  }
  TL_MARK(6);
  TL_SAVE(new_key ? 3 : 1, partial);
}

// One block of kG x D threads per (query head, sequence), at most kN splits (merge_partials).
template <typename T, int D, int kG, int kN>
__global__ void __launch_bounds__(kG * D) merge_kernel(AttnArgs a, int splits, int min_keys, const float* partial) {
  TL_BEGIN;
  pdl_trigger();  // the output projection's GEMV (PDL) may start fetching its weights
  const int b = blockIdx.y, h = blockIdx.x;
  // The step's metadata (uploaded before it, written by no kernel) is read before the wait.
  const int seq_len = a.b_seq_len[b], q_start = a.b_q_start[b];
  const int used = used_splits(seq_len, keys_per_split(seq_len, splits, min_keys));
  pdl_wait();  // launched with PDL: the partials are complete only now
  TL_MARK(1);
  merge_partials<T, D, kG, kN>(partial + (size_t(b) * a.Hq + h) * splits * (D + 2), used,
                       static_cast<T*>(a.out) + (size_t(q_start) * a.Hq + h) * D);
  TL_MARK(2);
  TL_SAVE(2, partial);
}

// An SM holds blocks of one L1 / shared-memory carveout at a time, and the driver's default for the
// merge (384 bytes of shared memory) is evidently a smaller one. Under PDL the next call's split
// blocks (three four-stage blocks an SM at D 64) found no room on the SMs still running a merge block:
// 92 of 392 started 2.4 us late (H100, D 64, batch 1, 32 heads). At the largest carveout a merge
// block fits beside three split blocks. 100: the percentage of the largest.
template <typename K>
cudaError_t set_carveout(K* kernel, bool max_carveout) {
  return set_func_attr(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, max_carveout ? 100 : -1);
}

template <typename T, int D, int S>
cudaError_t run_decode(dim3 grid, const AttnArgs& a, int splits, int min_keys, int hchunks, float* partial,
                       cudaStream_t s, bool pdl, bool max_carveout) {
  constexpr size_t smem = decode_smem_bytes<D, S>();
  cudaError_t e = set_func_attr(decode_kernel<T, D, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e == cudaSuccess) e = set_carveout(decode_kernel<T, D, S>, max_carveout);
  if (e != cudaSuccess) return e;
  return launch_pdl(pdl, decode_kernel<T, D, S>, grid, dim3(kThreads), smem, s, a, splits, min_keys, hchunks, partial);
}

template <typename T, int D, int kG, int kN>
cudaError_t run_merge(const AttnArgs& a, int splits, int min_keys, float* partial, cudaStream_t s, bool pdl,
                      bool max_carveout) {
  const cudaError_t e = set_carveout(merge_kernel<T, D, kG, kN>, max_carveout);
  if (e != cudaSuccess) return e;
  return launch_pdl(pdl, merge_kernel<T, D, kG, kN>, dim3(a.Hq, a.num_seqs), dim3(kG * D), 0, s, a, splits, min_keys,
                    static_cast<const float*>(partial));
}

template <typename T, int D>
cudaError_t launch(const AttnArgs& a, int splits, int min_keys, float* partial, cudaStream_t s, bool pdl,
                   int stages, bool max_carveout) {
  if (a.Hq % a.Hkv != 0) return cudaErrorInvalidValue;
  const int hchunks = (a.Hq / a.Hkv + 15) / 16;
  const dim3 grid(splits, a.Hkv * hchunks, a.num_seqs);
  cudaError_t e;
  if (splits == 1)
    e = run_decode<T, D, 2>(grid, a, splits, min_keys, hchunks, partial, s, pdl, max_carveout);
  else if constexpr (D == 64)
    e = stages >= 4 ? run_decode<T, D, 4>(grid, a, splits, min_keys, hchunks, partial, s, pdl, max_carveout)
                    : run_decode<T, D, 3>(grid, a, splits, min_keys, hchunks, partial, s, pdl, max_carveout);
  else
    e = run_decode<T, D, 3>(grid, a, splits, min_keys, hchunks, partial, s, pdl, max_carveout);
  if (e != cudaSuccess || splits == 1) return e;
  // More than 4 splits (batches of 1-4, one wave): four thread groups a row, so that the merge's
  // chain of instructions is a quarter as long; at most 4 (larger batches): one, as many threads as
  // dimensions. Loads are unrolled only to a bound of the grid's split count: 64, 36 or 16, and 4
  // (H200, attention-bench under PDL: the groups at 5-16 splits and the bound 36, D 64 batch 4 at 8k
  // 20.0 -> 19.8 us, D 128 batch 1 at 8k / 16k 12.1 / 19.6 -> 11.8 / 19.3; the bounds 16 and 4
  // before them, D 64 batch 4 at 8k 21.2 -> 20.8).
  if (splits > 36) return run_merge<T, D, 4, kMaxSplits>(a, splits, min_keys, partial, s, pdl, max_carveout);
  if (splits > 16) return run_merge<T, D, 4, 36>(a, splits, min_keys, partial, s, pdl, max_carveout);
  if (splits > 4) return run_merge<T, D, 4, 16>(a, splits, min_keys, partial, s, pdl, max_carveout);
  return run_merge<T, D, 1, 4>(a, splits, min_keys, partial, s, pdl, max_carveout);
}

}  // namespace

int decode_splits(int num_seqs, int Hkv, int head_dim, int max_seq_len, int num_sms, int min_keys, int stages) {
  // Blocks that fit one wave: split into exactly that many. Past one wave, about four waves of
  // three blocks an SM at D 64, so the last, partial wave idles at most a quarter of the time (H100,
  // batch 64, D 128, 32k keys: one split of 512 blocks ran at 0.84 of copy bandwidth, two splits at
  // 0.95). Waves of four three-stage blocks an SM gained nothing here (H200, D 64, 8k keys: batch
  // 256 in 2 splits 1.11 ms against 1.05 in 1, batch 128 in 3 splits 549 us against 555 in 2; the
  // 1- and 2-split calls without PDL).
  const int blocks = std::max(1, num_seqs * Hkv), wave = blocks_per_sm(head_dim, stages) * num_sms;
  const int waves4 = 4 * blocks_per_sm(head_dim, 4) * num_sms;
  int splits = blocks <= wave ? wave / blocks : (waves4 + blocks - 1) / blocks;
  const int grid_keys = min_keys > 0 ? min_keys : 64;  // no floor: the grid still assumes 64 keys a split
  splits = std::min(splits, std::max(1, (max_seq_len + grid_keys - 1) / grid_keys));
  return std::max(1, std::min(splits, kMaxSplits));
}

size_t decode_workspace_bytes(int max_seqs, int num_heads, int head_dim, int num_sms) {
  // decode_splits: B * splits <= max(wave / Hkv, B * (4 wave / (B Hkv) + 1)) <= 4 wave + B.
  const size_t rows = size_t(2 * max_seqs + 4 * max_blocks_per_sm(head_dim) * num_sms) * size_t(num_heads);
  return rows * size_t(head_dim + 2) * sizeof(float);
}

// The bound prefill_splits plans with (four-stage waves at D 64, as before the three-stage waves):
// decode_workspace_bytes holds at least this.
int workspace_rows_per_head(int head_dim, int num_sms) { return 4 * blocks_per_sm(head_dim, 4) * num_sms; }

// D 64 takes four stages (`stages`, CudaTuning::decode_stages) only where blocks of three could not
// fill a wave within kMaxSplits splits a sequence (batch 1 at 8 KV heads on 132 SMs): four stages
// paid for a few long splits (H100, Llama-3.2-1B at 32k, batch 1: step 1.576 -> 1.538 ms). Elsewhere
// a wave of four three-stage blocks an SM reads faster than one of three four-stage blocks (H200,
// attention-bench, D 64 at 8k / 32k keys: batch 4 16 splits 21.6 / 69.5 us against 12 splits 22.3
// / 70.4; batch 16 4 splits 69.7 / 262.9 against 3 splits 71.0 / 269.5; batch 32 2 splits 136.4 /
// 522.3 against 1 split 154.6 / 599.0; batch 64 1 split 261.1 / 1029.7 against 4 splits 269.0 /
// 1053.5). D 128 always takes three.
int decode_stages(int num_seqs, int Hkv, int head_dim, int num_sms, int stages) {
  const int blocks = std::max(1, num_seqs * Hkv);
  return head_dim <= 64 && stages >= 4 && blocks * kMaxSplits < blocks_per_sm(64, 3) * num_sms ? 4 : 3;
}

cudaError_t attention_decode(Act act, const AttnArgs& a, int splits, int min_keys, float* partial,
                             cudaStream_t s, bool pdl, int stages, bool max_carveout) {
  if (a.num_seqs == 0) return cudaSuccess;
  if (splits < 1 || splits > kMaxSplits || min_keys < 0) return cudaErrorInvalidValue;
  const bool bf = act == Act::BF16;
  switch (a.D) {
    case 64:
      return bf ? launch<__nv_bfloat16, 64>(a, splits, min_keys, partial, s, pdl, stages, max_carveout)
                : launch<__half, 64>(a, splits, min_keys, partial, s, pdl, stages, max_carveout);
    case 128:
      return bf ? launch<__nv_bfloat16, 128>(a, splits, min_keys, partial, s, pdl, stages, max_carveout)
                : launch<__half, 128>(a, splits, min_keys, partial, s, pdl, stages, max_carveout);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace lite_llama::cuda
