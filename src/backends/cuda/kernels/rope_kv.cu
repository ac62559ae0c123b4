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

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) rope_kv_kernel(RopeKvArgs a) {
  __shared__ float buf[kWarps][kMaxD];
  pdl_trigger();  // decode attention (PDL) may start on the keys of earlier steps
  pdl_wait();     // launched with PDL: the QKV projection is complete only now
  const int t = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int D = a.D, half = a.rot_dim / 2;
  const int row_len = (a.Hq + 2 * a.Hkv) * D;
  const T* src_row = static_cast<const T*>(a.qkv) + size_t(t) * row_len;
  const int pos = a.positions[t];
  const size_t slot = size_t(a.slots[t]);
  const float* cs = a.cos_sin + size_t(pos) * a.rot_dim;
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
    const float* nw = is_q ? a.q_norm : a.k_norm;
    if (nw) {
      const float inv = rsqrtf(warp_sum(ss) / float(D) + a.eps);
      // Round to T after the norm as the model computes it in its own dtype.
      for (int i = lane; i < D; i += 32) v[i] = to_f(from_f<T>(to_f(from_f<T>(v[i] * inv)) * nw[i]));
    }
    __syncwarp();
    for (int i = lane; i < half; i += 32) {
      const int ia = a.interleaved ? 2 * i : i;
      const int ib = a.interleaved ? 2 * i + 1 : i + half;
      const float x0 = v[ia], x1 = v[ib], c = cs[i], sn = cs[half + i];
      dst[ia] = from_f<T>(x0 * c - x1 * sn);
      dst[ib] = from_f<T>(x0 * sn + x1 * c);
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
  if (act == Act::BF16) return launch_pdl(pdl, rope_kv_kernel<__nv_bfloat16>, grid, dim3(kWarps * 32), 0, s, a);
  return launch_pdl(pdl, rope_kv_kernel<__half>, grid, dim3(kWarps * 32), 0, s, a);
}

}  // namespace lite_llama::cuda
