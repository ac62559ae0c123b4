// Flash-decoding for sequences with one new query token. Grid: (KV split, KV head [x head
// chunk], sequence). Each block reads its KV head's keys and values of one split once, through
// the request's slot table, for all query heads of the group (GQA without repeat_kv); a second
// kernel merges the splits with their log-sum-exp weights. The split count depends only on the
// batch size, so one CUDA graph serves every sequence length (lengths come from device memory).
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 128;

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
__global__ void __launch_bounds__(kThreads) decode_kernel(AttnArgs a, int splits, int hchunks,
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
  const int per = (seq_len + splits - 1) / splits;
  const int beg = split * per, end = min(seq_len, beg + per);
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

template <typename T, int D>
__global__ void merge_kernel(AttnArgs a, int splits, const float* __restrict__ partial) {
  const int b = blockIdx.y, h = blockIdx.x;
  const float* p = partial + (size_t(b) * a.Hq + h) * splits * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < splits; ++s) M = fmaxf(M, p[s * (D + 2) + D]);
  T* out = static_cast<T*>(a.out) + (size_t(a.b_q_start[b]) * a.Hq + h) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float L = 0.f, A = 0.f;
    for (int s = 0; s < splits; ++s) {
      const float w = exp2f(p[s * (D + 2) + D] - M);
      L += p[s * (D + 2) + D + 1] * w;
      A += p[s * (D + 2) + d] * w;
    }
    out[d] = from_f<T>(L > 0.f ? A / L : 0.f);
  }
}

template <typename T, int D>
cudaError_t launch(const AttnArgs& a, int splits, float* partial, cudaStream_t s) {
  const int group = a.Hq / a.Hkv;
  if (group <= 4) {
    const dim3 grid(splits, a.Hkv, a.num_seqs);
    decode_kernel<T, D, 8, 4><<<grid, kThreads, 0, s>>>(a, splits, 1, partial);
  } else {
    const int hchunks = (group + 7) / 8;
    const dim3 grid(splits, a.Hkv * hchunks, a.num_seqs);
    decode_kernel<T, D, 4, 8><<<grid, kThreads, 0, s>>>(a, splits, hchunks, partial);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  merge_kernel<T, D><<<dim3(a.Hq, a.num_seqs), D, 0, s>>>(a, splits, partial);
  return cudaGetLastError();
}

}  // namespace

int decode_splits(int num_seqs, int Hkv, int max_seq_len, int num_sms) {
  const int blocks = std::max(1, num_seqs * Hkv);
  int splits = (2 * num_sms + blocks - 1) / blocks;
  splits = std::min(splits, std::max(1, (max_seq_len + 63) / 64));  // >= 64 keys per split
  return std::max(1, std::min(splits, 64));
}

cudaError_t attention_decode(Act act, const AttnArgs& a, int splits, float* partial, cudaStream_t s) {
  if (a.num_seqs == 0) return cudaSuccess;
  const bool bf = act == Act::BF16;
  switch (a.D) {
    case 64: return bf ? launch<__nv_bfloat16, 64>(a, splits, partial, s) : launch<__half, 64>(a, splits, partial, s);
    case 128: return bf ? launch<__nv_bfloat16, 128>(a, splits, partial, s) : launch<__half, 128>(a, splits, partial, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace lite_llama::cuda
