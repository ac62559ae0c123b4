// Causal flash attention (FA2 style) over packed variable-length prefill chunks. K/V are read
// from the token-level pool through the request's slot table, so a chunk attends to its whole
// prefix without any contiguous copy. GQA by index mapping (kv_head = q_head / group).
// Block: 64 queries of one (sequence, head), 4 warps x 16 rows. Tensor cores via WMMA compute
// S = Q K^T and O += P V; the online softmax runs on an fp32 copy of S in shared memory.
#include <mma.h>

#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

using namespace nvcuda;

constexpr int kBM = 64;   // queries per block
constexpr int kBN = 64;   // keys per tile
constexpr int kWarps = 4;
constexpr int kPad = 8;   // 16-byte row padding against bank conflicts (WMMA needs ldm % 8 == 0)

template <int D>
struct Smem {
  static constexpr int kLd = D + kPad;       // 16-bit row stride of Q/K/V tiles
  static constexpr int kLdS = kBN + 4;       // float row stride of S
  static constexpr int kLdP = kBN + kPad;    // 16-bit row stride of P
  static constexpr int kLdO = D + 4;         // float row stride of O
  static constexpr size_t kQ = size_t(kBM) * kLd * 2;
  static constexpr size_t kK = size_t(kBN) * kLd * 2;
  static constexpr size_t kS = size_t(kBM) * kLdS * 4;
  static constexpr size_t kP = size_t(kBM) * kLdP * 2;
  static constexpr size_t kO = size_t(kBM) * kLdO * 4;
  static constexpr size_t kStats = size_t(kBM) * 3 * 4;
  static constexpr size_t kTotal = kQ + 2 * kK + kS + kP + kO + kStats;
};

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) prefill_kernel(AttnArgs a) {
  using S = Smem<D>;
  extern __shared__ __align__(16) uint8_t smem[];
  T* Qs = reinterpret_cast<T*>(smem);
  T* Ks = reinterpret_cast<T*>(smem + S::kQ);
  T* Vs = reinterpret_cast<T*>(smem + S::kQ + S::kK);
  float* Ss = reinterpret_cast<float*>(smem + S::kQ + 2 * S::kK);
  T* Ps = reinterpret_cast<T*>(smem + S::kQ + 2 * S::kK + S::kS);
  float* Os = reinterpret_cast<float*>(smem + S::kQ + 2 * S::kK + S::kS + S::kP);
  float* row_m = reinterpret_cast<float*>(smem + S::kQ + 2 * S::kK + S::kS + S::kP + S::kO);
  float* row_l = row_m + kBM;
  float* row_a = row_l + kBM;

  const int b = blockIdx.z, h = blockIdx.y, q_tile = blockIdx.x;
  const int q_len = a.b_q_len[b];
  const int q0 = q_tile * kBM;
  if (q0 >= q_len) return;
  const int seq_len = a.b_seq_len[b];
  const int prefix = seq_len - q_len;  // keys before the chunk's first query
  const int q_start = a.b_q_start[b];
  const int kvh = h / (a.Hq / a.Hkv);
  const int32_t* slots = a.req_to_slot + size_t(a.b_req_idx[b]) * a.req_stride;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rows_here = min(kBM, q_len - q0);
  constexpr int kChunks = D / 8;  // 16-byte chunks per row

  // Load the query tile (rows past the chunk are zero) and reset O and the row statistics.
  for (int i = tid; i < kBM * kChunks; i += blockDim.x) {
    const int r = i / kChunks, c = i % kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < rows_here)
      v = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.q) +
                                         (size_t(q_start + q0 + r) * a.Hq + h) * D + c * 8);
    *reinterpret_cast<uint4*>(Qs + r * S::kLd + c * 8) = v;
  }
  for (int i = tid; i < kBM * S::kLdO; i += blockDim.x) Os[i] = 0.f;
  for (int i = tid; i < kBM; i += blockDim.x) row_m[i] = -INFINITY, row_l[i] = 0.f;
  __syncthreads();

  const float scale_log2 = a.scale * 1.4426950408889634f;
  const int last_key = prefix + q0 + rows_here - 1;  // causal: no key beyond the last query
  for (int k0 = 0; k0 <= last_key; k0 += kBN) {
    const int keys = min(kBN, last_key + 1 - k0);
    for (int i = tid; i < kBN * kChunks; i += blockDim.x) {
      const int r = i / kChunks, c = i % kChunks;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (r < keys) {
        const size_t off = (size_t(slots[k0 + r]) * a.Hkv + kvh) * D + c * 8;
        kv = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.k_pool) + off);
        vv = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.v_pool) + off);
      }
      *reinterpret_cast<uint4*>(Ks + r * S::kLd + c * 8) = kv;
      *reinterpret_cast<uint4*>(Vs + r * S::kLd + c * 8) = vv;
    }
    __syncthreads();

    // S[16 rows of this warp, 64 keys] = Q K^T
    for (int n = 0; n < kBN / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, Qs + warp * 16 * S::kLd + kk * 16, S::kLd);
        wmma::load_matrix_sync(fb, Ks + n * 16 * S::kLd + kk * 16, S::kLd);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(Ss + warp * 16 * S::kLdS + n * 16, acc, S::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: two lanes per row, 32 columns each.
    {
      const int r = warp * 16 + (lane >> 1);
      const int cbeg = (lane & 1) * 32;
      const int qpos = prefix + q0 + r;  // position of this query
      float* srow = Ss + r * S::kLdS;
      float mx = -INFINITY;
      for (int c = cbeg; c < cbeg + 32; ++c) {
        const int kpos = k0 + c;
        const float sv = (c < keys && kpos <= qpos) ? srow[c] * scale_log2 : -INFINITY;
        srow[c] = sv;
        mx = fmaxf(mx, sv);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, mx);
      // A row with no visible key yet (m_new = -inf) contributes nothing.
      const float base = m_new == -INFINITY ? 0.f : m_new;
      float sum = 0.f;
      for (int c = cbeg; c < cbeg + 32; ++c) {
        const float p = exp2f(srow[c] - base);
        sum += p;
        Ps[r * S::kLdP + c] = from_f<T>(p);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const float alpha = exp2f(m_old - base);
      __syncwarp();
      if ((lane & 1) == 0) {
        row_l[r] = row_l[r] * alpha + sum;
        row_m[r] = m_new;
        row_a[r] = alpha;
      }
      __syncwarp();
      // Rescale this row's running output (each lane half of D).
      const float al = row_a[r];
      for (int d = (lane & 1) * (D / 2); d < (lane & 1 ? D : D / 2); ++d) Os[r * S::kLdO + d] *= al;
    }
    __syncwarp();

    // O[16 rows, D] += P[16, 64] V[64, D]
    for (int dn = 0; dn < D / 16; ++dn) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      float* op = Os + warp * 16 * S::kLdO + dn * 16;
      wmma::load_matrix_sync(acc, op, S::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, Ps + warp * 16 * S::kLdP + kk * 16, S::kLdP);
        wmma::load_matrix_sync(fb, Vs + kk * 16 * S::kLd + dn * 16, S::kLd);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(op, acc, S::kLdO, wmma::mem_row_major);
    }
    __syncthreads();  // K/V tiles are overwritten next
  }

  // Normalise and write this warp's rows.
  for (int i = lane; i < 16 * kChunks; i += 32) {
    const int rr = i / kChunks, c = i % kChunks;
    const int r = warp * 16 + rr;
    if (r >= rows_here) continue;
    const float inv = row_l[r] > 0.f ? 1.0f / row_l[r] : 0.f;
    float o[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = Os[r * S::kLdO + c * 8 + j] * inv;
    *reinterpret_cast<uint4*>(static_cast<T*>(a.out) + (size_t(q_start + q0 + r) * a.Hq + h) * D + c * 8) =
        pack8<T>(o);
  }
}

template <typename T, int D>
cudaError_t launch(const AttnArgs& a, cudaStream_t s) {
  const size_t smem = Smem<D>::kTotal;
  // Per device and cheap: set on every launch rather than cached in a static.
  cudaError_t e = cudaFuncSetAttribute(prefill_kernel<T, D>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(ceil_div(a.max_q_len, kBM), a.Hq, a.num_seqs);
  prefill_kernel<T, D><<<grid, kWarps * 32, smem, s>>>(a);
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
