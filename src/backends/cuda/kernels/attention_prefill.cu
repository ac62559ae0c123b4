// Causal flash attention (FlashAttention-2 style, mma.sync) over packed variable-length prefill
// chunks. K/V are read from the token-level pool through the request's slot table, so a chunk
// attends to its whole prefix without any contiguous copy. Grid: (query tile, KV head, sequence);
// a block's 128 rows are (token, head) pairs of one KV head's group, 32 per warp, and every warp
// runs over the same pipelined K/V tiles (attention_tile.cuh).
#include "backends/cuda/kernels/attention_tile.cuh"
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

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) prefill_kernel(AttnArgs a) {
  using C = Cfg<D>;
  constexpr int MT = C::kMT;
  extern __shared__ __align__(16) uint8_t smem[];
  T* Qs = reinterpret_cast<T*>(smem);
  uint8_t* pipe_smem = smem + size_t(C::kRows) * ld<D>() * 2;

  const int G = a.Hq / a.Hkv, tokens = C::kRows / G;
  const int b = blockIdx.z, kvh = blockIdx.y;
  const int q_tile = gridDim.x - 1 - blockIdx.x;  // the longest (last) tiles start first
  const int q_len = a.b_q_len[b], tq0 = q_tile * tokens;
  if (tq0 >= q_len) return;
  const int ntok = min(tokens, q_len - tq0), nrows = ntok * G;
  const int prefix = a.b_seq_len[b] - q_len;  // keys before the chunk's first query
  const int key_end = prefix + tq0 + ntok;     // causal: no key past the last query
  const int mask_from = prefix + tq0;          // keys below are visible to every row
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  KvPipe<T, D, C::kStages> pipe{reinterpret_cast<T*>(pipe_smem),
                                reinterpret_cast<int32_t*>(pipe_smem + C::kStages * 2 * kBN * ld<D>() * 2),
                                a.req_to_slot + size_t(a.b_req_idx[b]) * a.req_stride,
                                static_cast<const T*>(a.k_pool),
                                static_cast<const T*>(a.v_pool),
                                a.Hkv,
                                kvh,
                                key_end,
                                (key_end + kBN - 1) / kBN};

  // Q rows (the group's heads are adjacent in q), zeros past the chunk, in the pipeline's first
  // commit group.
  const size_t q_row0 = size_t(a.b_q_start[b] + tq0) * a.Hq + size_t(kvh) * G;
  const T* qb = static_cast<const T*>(a.q);
  for (int i = threadIdx.x; i < C::kRows * (D / 8); i += kThreads) {
    const int r = i / (D / 8), c = i % (D / 8);
    const bool ok = r < nrows;
    cp_async16(Qs + r * ld<D>() + c * 8, ok ? qb + (q_row0 + size_t(r / G) * a.Hq + r % G) * D + c * 8 : qb, ok);
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
      lim[mt][h] = r < nrows ? prefix + tq0 + r / G + 1 : key_end;
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

  // Normalise and write this lane's rows.
  w.reduce_l();
  T* out = static_cast<T*>(a.out);
  const int t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 * MT + mt * 16 + g + 8 * h;
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
  using C = Cfg<D>;
  const int G = a.Hq / a.Hkv;
  if (G < 1 || G > C::kRows || a.Hq % a.Hkv != 0) return cudaErrorInvalidValue;
  // Per device and cheap: set on every launch rather than cached in a static.
  cudaError_t e = cudaFuncSetAttribute(prefill_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmem));
  if (e != cudaSuccess) return e;
  const dim3 grid(ceil_div(a.max_q_len, C::kRows / G), a.Hkv, a.num_seqs);
  prefill_kernel<T, D><<<grid, kThreads, C::kSmem, s>>>(a);
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
