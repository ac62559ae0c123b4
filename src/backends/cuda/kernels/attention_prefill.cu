// Causal flash attention (FlashAttention-2 style, mma.sync) over packed variable-length prefill
// chunks. K/V are read from the token-level pool through the request's slot table, so a chunk
// attends to its whole prefix without any contiguous copy. Grid: (query tile, KV head, sequence);
// a block's 64 rows are (token, head) pairs of one KV head's group, 16 per warp, and every warp
// runs over the same double-buffered K/V tiles (attention_tile.cuh).
#include "backends/cuda/kernels/attention_tile.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

using namespace attn;

constexpr int kMT = 1;                     // 16-row tiles per warp
constexpr int kRows = kWarps * 16 * kMT;   // rows (token, head) per block

template <int D>
constexpr size_t smem_bytes() {
  return size_t(kRows + 4 * kBN) * ld<D>() * 2 + 2 * kBN * sizeof(int32_t);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) prefill_kernel(AttnArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  T* Qs = reinterpret_cast<T*>(smem);
  T* KV = Qs + kRows * ld<D>();  // stage s: K at KV + 2 s kBN ld, V after it
  int32_t* slot_ids = reinterpret_cast<int32_t*>(KV + 4 * kBN * ld<D>());

  const int G = a.Hq / a.Hkv, tokens = kRows / G;
  const int b = blockIdx.z, kvh = blockIdx.y;
  const int q_tile = gridDim.x - 1 - blockIdx.x;  // the longest (last) tiles start first
  const int q_len = a.b_q_len[b], tq0 = q_tile * tokens;
  if (tq0 >= q_len) return;
  const int ntok = min(tokens, q_len - tq0), nrows = ntok * G;
  const int prefix = a.b_seq_len[b] - q_len;  // keys before the chunk's first query
  const int key_end = prefix + tq0 + ntok;     // causal: no key past the last query
  const int mask_from = prefix + tq0;          // keys below are visible to every row
  const int32_t* slots = a.req_to_slot + size_t(a.b_req_idx[b]) * a.req_stride;
  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

  // Q rows (the group's heads are adjacent in q), zeros past the chunk; slot ids of tile 0.
  const size_t q_row0 = size_t(a.b_q_start[b] + tq0) * a.Hq + size_t(kvh) * G;
  const T* qb = static_cast<const T*>(a.q);
  for (int i = threadIdx.x; i < kRows * (D / 8); i += kThreads) {
    const int r = i / (D / 8), c = i % (D / 8);
    const bool ok = r < nrows;
    cp_async16(Qs + r * ld<D>() + c * 8, ok ? qb + (q_row0 + size_t(r / G) * a.Hq + r % G) * D + c * 8 : qb, ok);
  }
  load_slots(slot_ids, slots, 0, key_end);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const int ntiles = (key_end + kBN - 1) / kBN;
  load_kv<T, D>(KV, KV + kBN * ld<D>(), slot_ids, k_pool, v_pool, a.Hkv, kvh, 0, key_end);
  if (ntiles > 1) load_slots(slot_ids + kBN, slots, kBN, key_end);
  cp_async_commit();

  uint32_t q[kMT][D / 16][4];
  load_q_frags<T, D, kMT>(q, Qs, warp * 16 * kMT);
  int lim[kMT][2];
  const int g = lane >> 2;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 * kMT + mt * 16 + g + 8 * h;
      lim[mt][h] = r < nrows ? prefix + tq0 + r / G + 1 : key_end;
    }
  WarpAttn<T, D, kMT> w;
  w.init();
  const float scale_log2 = a.scale * 1.4426950408889634f;
  for (int j = 0; j < ntiles; ++j) {
    cp_async_wait<0>();
    __syncthreads();  // tile j landed; every warp is done with tile j - 1's buffers
    if (j + 1 < ntiles) {
      T* Kn = KV + 2 * ((j + 1) & 1) * kBN * ld<D>();
      load_kv<T, D>(Kn, Kn + kBN * ld<D>(), slot_ids + ((j + 1) & 1) * kBN, k_pool, v_pool, a.Hkv, kvh,
                    (j + 1) * kBN, key_end);
      if (j + 2 < ntiles) load_slots(slot_ids + (j & 1) * kBN, slots, (j + 2) * kBN, key_end);
      cp_async_commit();
    }
    const T* Kc = KV + 2 * (j & 1) * kBN * ld<D>();
    const int k0 = j * kBN;
    w.template tile<kBN / 8>(q, Kc, Kc + kBN * ld<D>(), 0, k0, k0 + kBN > mask_from, lim, scale_log2);
  }

  // Normalise and write this lane's rows.
  w.reduce_l();
  T* out = static_cast<T*>(a.out);
  const int t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 * kMT + mt * 16 + g + 8 * h;
      if (r >= nrows) continue;
      const float inv = w.l[mt][h] > 0.f ? 1.f / w.l[mt][h] : 0.f;
      T* orow = out + (q_row0 + size_t(r / G) * a.Hq + r % G) * D + 2 * t;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd)
        *reinterpret_cast<uint32_t*>(orow + nd * 8) =
            pack2<T>(w.o[mt][nd][2 * h] * inv, w.o[mt][nd][2 * h + 1] * inv);
    }
}

template <typename T, int D>
cudaError_t launch(const AttnArgs& a, cudaStream_t s) {
  const int G = a.Hq / a.Hkv;
  if (G < 1 || G > kRows || a.Hq % a.Hkv != 0) return cudaErrorInvalidValue;
  constexpr size_t smem = smem_bytes<D>();
  // Per device and cheap: set on every launch rather than cached in a static.
  cudaError_t e = cudaFuncSetAttribute(prefill_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(ceil_div(a.max_q_len, kRows / G), a.Hkv, a.num_seqs);
  prefill_kernel<T, D><<<grid, kThreads, smem, s>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_prefill(Act act, const AttnArgs& a, cudaStream_t s) {
  if (a.num_seqs == 0 || a.max_q_len == 0) return cudaSuccess;
  const bool bf = act == Act::BF16;
  switch (a.D) {
    case 64: return bf ? launch<__nv_bfloat16, 64>(a, s) : launch<__half, 64>(a, s);
    case 128: return bf ? launch<__nv_bfloat16, 128>(a, s) : launch<__half, 128>(a, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace lite_llama::cuda
