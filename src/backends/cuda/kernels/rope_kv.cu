// RoPE fused with the KV-pool write: block (t, y) takes token t's heads y * 8 .. y * 8 + 7 (one
// block per token left a decode step's 40+ heads to 8 warps in turn); each warp takes a head of q, k or v,
// (Qwen3) RMS-normalises it, rotates q/k with the precomputed cos/sin row of the token's
// position, and writes q to the packed query buffer and k/v straight into the pool slot.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxD = 256;
constexpr int kEarlyTokens = 512;  // steps of up to this many tokens take rope_kv_kernel<T, true>

// kEarly: the cos/sin row and the q/k norm weights are loaded into registers before pdl_wait(), so
// the position -> cos/sin chain of DRAM trips is off the path after it (Qwen3-4B decode at 16k:
// 4.34 -> 4.20 ms a step with the norm kernels' early loads). It doubles the registers (80, 3
// blocks an SM instead of 6), which prefill steps pay for, so they read them after the wait.
template <typename T, bool kEarly>
__global__ void __launch_bounds__(kWarps * 32) rope_kv_kernel(RopeKvArgs a) {
  __shared__ float buf[kWarps][kMaxD];
  pdl_trigger();  // decode attention (PDL) may start on the keys of earlier steps
  const int t = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int D = a.D, half = a.rot_dim / 2;
  const int row_len = (a.Hq + 2 * a.Hkv) * D;
  const T* src_row = static_cast<const T*>(a.qkv) + size_t(t) * row_len;
  // With kEarly, before the wait (the QKV GEMV may still run): what no kernel of the step writes,
  // the token's position and slot (uploaded before the step), its cos/sin row and the q/k norm
  // weights. Without it they are read after the wait, in 32 registers (the kernel before kEarly
  // took 40), so prefill keeps its blocks an SM.
  int pos = 0;
  size_t slot = 0;
  const float* cs = nullptr;
  auto token_meta = [&] {
    pos = a.positions[t];
    slot = size_t(a.slots[t]);
    cs = a.cos_sin + size_t(pos) * a.rot_dim;
  };
  constexpr int kPer = kMaxD / 32;  // values of a head a lane holds at most
  float cr[kPer / 2], sr[kPer / 2], qn[kPer], kn[kPer];  // unused (no registers) without kEarly
  if constexpr (kEarly) {
    token_meta();
#pragma unroll
    for (int j = 0; j < kPer / 2; ++j) {
      const int i = lane + 32 * j;
      cr[j] = i < half ? cs[i] : 0.f;
      sr[j] = i < half ? cs[half + i] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int i = lane + 32 * j;
      qn[j] = a.q_norm && i < D ? a.q_norm[i] : 0.f;
      kn[j] = a.k_norm && i < D ? a.k_norm[i] : 0.f;
    }
  }
  pdl_wait();  // launched with PDL: the QKV projection is complete only now
  if constexpr (!kEarly) token_meta();
  float* v = buf[warp];
  for (int h = int(blockIdx.y) * kWarps + warp; h < a.Hq + 2 * a.Hkv; h += int(gridDim.y) * kWarps) {
    const T* src = src_row + size_t(h) * D;
    const bool is_q = h < a.Hq, is_k = !is_q && h < a.Hq + a.Hkv;
    T* dst;
    if (is_q) {
      dst = static_cast<T*>(a.q_out) + size_t(t) * a.Hq * D + size_t(h) * D;
    } else if (is_k) {
      dst = static_cast<T*>(a.k_pool) + (slot * a.Hkv + (h - a.Hq)) * D;
    } else {
      dst = static_cast<T*>(a.v_pool) + (slot * a.Hkv + (h - a.Hq - a.Hkv)) * D;
    }
    if (!is_q && !is_k) {  // V: plain copy
      for (int i = lane; i < D; i += 32) dst[i] = src[i];
      continue;
    }
    float ss = 0.f;
    for (int i = lane; i < D; i += 32) {
      v[i] = to_f(src[i]);
      ss += v[i] * v[i];
    }
    if (is_q ? a.q_norm : a.k_norm) {
      const float inv = rsqrtf(warp_sum(ss) / float(D) + a.eps);
      // Round to T after the norm as the model computes it in its own dtype. Unrolled only where
      // the indices pick registers (kEarly): the rolled loops keep the other variant at 32.
#pragma unroll(kEarly ? kPer : 1)
      for (int j = 0; j < kPer; ++j) {
        const int i = lane + 32 * j;
        if (i < D) {
          const float nw = kEarly ? (is_q ? qn[j] : kn[j]) : (is_q ? a.q_norm : a.k_norm)[i];
          v[i] = to_f(from_f<T>(to_f(from_f<T>(v[i] * inv)) * nw));
        }
      }
    }
    __syncwarp();
#pragma unroll(kEarly ? kPer / 2 : 1)
    for (int j = 0; j < kPer / 2; ++j) {
      const int i = lane + 32 * j;
      if (i >= half) break;
      const int ia = a.interleaved ? 2 * i : i;
      const int ib = a.interleaved ? 2 * i + 1 : i + half;
      const float x0 = v[ia], x1 = v[ib], c = kEarly ? cr[j] : cs[i], sn = kEarly ? sr[j] : cs[half + i];
      float y0, y1;
      rope_rotate(x0, x1, c, sn, y0, y1);
      dst[ia] = from_f<T>(y0);
      dst[ib] = from_f<T>(y1);
    }
    for (int i = a.rot_dim + lane; i < D; i += 32) dst[i] = from_f<T>(v[i]);  // unrotated tail
    __syncwarp();
  }
}

}  // namespace

cudaError_t qkv_rope_store(Act act, const RopeKvArgs& a, cudaStream_t s, bool pdl) {
  if (a.T == 0) return cudaSuccess;
  if (a.D > kMaxD || a.rot_dim > a.D) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(a.T), ceil_div(a.Hq + 2 * a.Hkv, kWarps));
  const bool early = a.T <= kEarlyTokens;
  if (act == Act::BF16)
    return launch_pdl(pdl, early ? rope_kv_kernel<__nv_bfloat16, true> : rope_kv_kernel<__nv_bfloat16, false>, grid,
                      dim3(kWarps * 32), 0, s, a);
  return launch_pdl(pdl, early ? rope_kv_kernel<__half, true> : rope_kv_kernel<__half, false>, grid, dim3(kWarps * 32),
                    0, s, a);
}

}  // namespace lite_llama::cuda
