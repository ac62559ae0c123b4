// Flash-decoding for sequences with one new query token. Grid: (KV split, KV head [x head
// chunk], sequence). Each block reads its KV head's keys and values of one split once, through
// the request's slot table, for all query heads of the group (GQA without repeat_kv); a second
// kernel merges the splits with their log-sum-exp weights. The grid depends only on the batch
// size and max_seq_len, so one CUDA graph serves every sequence length: lengths come from device
// memory, and a sequence uses the first ceil(len / keys_per_split) splits of its grid row.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxSplits = 64;

// Keys per split of a sequence: spread over all `splits`, but at least `min_keys` (0: no floor),
// so short sequences use fewer, fuller splits. The merge derives the same count.
__device__ __forceinline__ int keys_per_split(int seq_len, int splits, int min_keys) {
  return max(min_keys, (seq_len + splits - 1) / splits);
}
__device__ __forceinline__ int used_splits(int seq_len, int per) {
  return per > 0 ? (seq_len + per - 1) / per : 0;
}

template <typename T, int EPT>
__device__ __forceinline__ void load_chunk(const T* p, float* f) {
  if constexpr (EPT == 8) {
    unpack8<T>(*reinterpret_cast<const uint4*>(p), f);
  } else {
    const uint2 r = *reinterpret_cast<const uint2*>(p);
    const T* e = reinterpret_cast<const T*>(&r);
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = to_f(e[i]);
  }
}

// EPT dims per thread, TPK = D / EPT threads per key, KPP = kThreads / TPK keys in flight.
template <typename T, int D, int EPT, int GMAX>
__global__ void __launch_bounds__(kThreads) decode_kernel(AttnArgs a, int splits, int min_keys, int hchunks,
                                                          float* __restrict__ partial) {
  constexpr int TPK = D / EPT, KPP = kThreads / TPK;
  __shared__ float sm_m[KPP][GMAX], sm_l[KPP][GMAX];
  __shared__ float sm_acc[KPP][GMAX][D];

  const int b = blockIdx.z, split = blockIdx.x;
  const int kvh = blockIdx.y / hchunks, hc = blockIdx.y % hchunks;
  const int group = a.Hq / a.Hkv;
  const int h0 = kvh * group + hc * GMAX;
  const int nh = min(GMAX, group - hc * GMAX);
  const int seq_len = a.b_seq_len[b];
  const int per = keys_per_split(seq_len, splits, min_keys);
  const int beg = split * per, end = min(seq_len, beg + per);
  if (beg >= seq_len) return;  // an unused split: the merge reads only the used ones
  const int tid = threadIdx.x, kl = tid % TPK, kg = tid / TPK;
  const int t = a.b_q_start[b];
  const int32_t* slots = a.req_to_slot + size_t(a.b_req_idx[b]) * a.req_stride;

  float q[GMAX][EPT], acc[GMAX][EPT], m[GMAX], l[GMAX];
  const float qs = a.scale * 1.4426950408889634f;  // exp2-based softmax
#pragma unroll
  for (int j = 0; j < GMAX; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.f;
#pragma unroll
    for (int e = 0; e < EPT; ++e) acc[j][e] = 0.f, q[j][e] = 0.f;
    if (j < nh) {
      load_chunk<T, EPT>(static_cast<const T*>(a.q) + (size_t(t) * a.Hq + h0 + j) * D + kl * EPT, q[j]);
#pragma unroll
      for (int e = 0; e < EPT; ++e) q[j][e] *= qs;
    }
  }
  const T* kbase = static_cast<const T*>(a.k_pool) + size_t(kvh) * D + kl * EPT;
  const T* vbase = static_cast<const T*>(a.v_pool) + size_t(kvh) * D + kl * EPT;
  const size_t row = size_t(a.Hkv) * D;
  // Two keys per thread group per iteration: both keys' slot, K and V loads are issued before
  // either is used. The trip count is the same for every lane, so the shuffles see full warps.
  auto load = [&](int j, float* kf, float* vf) {
    if (j < end) {
      const size_t slot = size_t(slots[j]);
      load_chunk<T, EPT>(kbase + slot * row, kf);
      load_chunk<T, EPT>(vbase + slot * row, vf);
    } else {
#pragma unroll
      for (int e = 0; e < EPT; ++e) kf[e] = vf[e] = 0.f;
    }
  };
  auto update = [&](bool valid, const float* kf, const float* vf) {
#pragma unroll
    for (int h = 0; h < GMAX; ++h) {
      if (h >= nh) break;
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < EPT; ++e) s = fmaf(q[h][e], kf[e], s);
#pragma unroll
      for (int o = TPK / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (!valid) continue;
      const float m_new = fmaxf(m[h], s);
      const float corr = exp2f(m[h] - m_new);
      const float p = exp2f(s - m_new);
      l[h] = l[h] * corr + p;
#pragma unroll
      for (int e = 0; e < EPT; ++e) acc[h][e] = fmaf(acc[h][e], corr, p * vf[e]);
      m[h] = m_new;
    }
  };
  for (int j0 = beg; j0 < end; j0 += 2 * KPP) {
    const int ja = j0 + kg, jb = j0 + KPP + kg;
    float ka[EPT], va[EPT], kb[EPT], vb[EPT];
    load(ja, ka, va);
    load(jb, kb, vb);
    update(ja < end, ka, va);
    update(jb < end, kb, vb);
  }
  // Combine the KPP key groups of the block.
#pragma unroll
  for (int h = 0; h < GMAX; ++h) {
    if (kl == 0) sm_m[kg][h] = m[h], sm_l[kg][h] = l[h];
#pragma unroll
    for (int e = 0; e < EPT; ++e) sm_acc[kg][h][kl * EPT + e] = acc[h][e];
  }
  __syncthreads();
  for (int i = tid; i < nh * D; i += kThreads) {
    const int h = i / D, d = i % D;
    float M = -INFINITY;
    for (int g = 0; g < KPP; ++g) M = fmaxf(M, sm_m[g][h]);
    float L = 0.f, A = 0.f;
    if (M != -INFINITY) {
      for (int g = 0; g < KPP; ++g) {
        const float w = exp2f(sm_m[g][h] - M);
        L += sm_l[g][h] * w;
        A += sm_acc[g][h][d] * w;
      }
    }
    float* out = partial + ((size_t(b) * a.Hq + h0 + h) * splits + split) * (D + 2);
    out[d] = A;
    if (d == 0) out[D] = M, out[D + 1] = L;
  }
}

// One block of D threads per (query head, sequence). The used splits' weights exp2(m_s - M) are
// computed once, one thread per split, so each output dimension is a single weighted sum.
template <typename T, int D>
__global__ void __launch_bounds__(D) merge_kernel(AttnArgs a, int splits, int min_keys,
                                                  const float* __restrict__ partial) {
  static_assert(D >= kMaxSplits, "one thread per split");
  pdl_trigger();  // the output projection's GEMV (PDL) may start fetching its weights
  __shared__ float w[kMaxSplits], red[32];
  const int b = blockIdx.y, h = blockIdx.x, t = threadIdx.x;
  const int seq_len = a.b_seq_len[b];
  const int used = used_splits(seq_len, keys_per_split(seq_len, splits, min_keys));
  const float* p = partial + (size_t(b) * a.Hq + h) * splits * (D + 2);
  const float m = t < used ? p[t * (D + 2) + D] : -INFINITY;
  const float M = block_max(m, red);
  const float wt = m != -INFINITY ? exp2f(m - M) : 0.f;
  const float L = block_sum(t < used ? p[t * (D + 2) + D + 1] * wt : 0.f, red);
  if (t < kMaxSplits) w[t] = wt;
  __syncthreads();
  float A = 0.f;
#pragma unroll 4
  for (int s = 0; s < used; ++s) A = fmaf(w[s], p[s * (D + 2) + t], A);
  T* out = static_cast<T*>(a.out) + (size_t(a.b_q_start[b]) * a.Hq + h) * D;
  out[t] = from_f<T>(L > 0.f ? A / L : 0.f);
}

template <typename T, int D>
cudaError_t launch(const AttnArgs& a, int splits, int min_keys, float* partial, cudaStream_t s) {
  const int group = a.Hq / a.Hkv;
  if (group <= 4) {
    const dim3 grid(splits, a.Hkv, a.num_seqs);
    decode_kernel<T, D, 8, 4><<<grid, kThreads, 0, s>>>(a, splits, min_keys, 1, partial);
  } else {
    const int hchunks = (group + 7) / 8;
    const dim3 grid(splits, a.Hkv * hchunks, a.num_seqs);
    decode_kernel<T, D, 4, 8><<<grid, kThreads, 0, s>>>(a, splits, min_keys, hchunks, partial);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  merge_kernel<T, D><<<dim3(a.Hq, a.num_seqs), D, 0, s>>>(a, splits, min_keys, partial);
  return cudaGetLastError();
}

}  // namespace

int decode_splits(int num_seqs, int Hkv, int max_seq_len, int num_sms, int min_keys) {
  const int blocks = std::max(1, num_seqs * Hkv);
  int splits = (2 * num_sms + blocks - 1) / blocks;
  const int grid_keys = min_keys > 0 ? min_keys : 64;  // no floor: the grid still assumes 64 keys a split
  splits = std::min(splits, std::max(1, (max_seq_len + grid_keys - 1) / grid_keys));
  return std::max(1, std::min(splits, kMaxSplits));
}

cudaError_t attention_decode(Act act, const AttnArgs& a, int splits, int min_keys, float* partial,
                             cudaStream_t s) {
  if (a.num_seqs == 0) return cudaSuccess;
  if (splits < 1 || splits > kMaxSplits || min_keys < 0) return cudaErrorInvalidValue;
  const bool bf = act == Act::BF16;
  switch (a.D) {
    case 64: return bf ? launch<__nv_bfloat16, 64>(a, splits, min_keys, partial, s) : launch<__half, 64>(a, splits, min_keys, partial, s);
    case 128: return bf ? launch<__nv_bfloat16, 128>(a, splits, min_keys, partial, s) : launch<__half, 128>(a, splits, min_keys, partial, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace lite_llama::cuda
