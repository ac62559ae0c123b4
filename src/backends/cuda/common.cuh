// Shared device helpers: element types (bf16 / fp16 activations with fp32 math), 16-byte vector
// access, warp and block reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace lite_llama::cuda {

template <typename T>
struct Elem;
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16(v); }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_f(float v) { return __float2half(v); }
};
template <>
struct Elem<float> {
  static __device__ __forceinline__ float to_f(float v) { return v; }
  static __device__ __forceinline__ float from_f(float v) { return v; }
};

template <typename T>
__device__ __forceinline__ float to_f(T v) { return Elem<T>::to_f(v); }
template <typename T>
__device__ __forceinline__ T from_f(float v) { return Elem<T>::from_f(v); }

// 8 x 16-bit elements in one 16-byte access.
struct alignas(16) Vec8 {
  uint4 raw;
};

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& r, float* f) {
  const T* e = reinterpret_cast<const T*>(&r);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_f(e[i]);
}

template <typename T>
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint4 r;
  T* e = reinterpret_cast<T*>(&r);
#pragma unroll
  for (int i = 0; i < 8; ++i) e[i] = from_f<T>(f[i]);
  return r;
}

// 8 elements of T (16-bit: one 16-byte access; float: two) to / from fp32.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float* f) {
  if constexpr (sizeof(T) == 4) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    unpack8<T>(*reinterpret_cast<const uint4*>(p), f);
  }
}

template <typename T>
__device__ __forceinline__ void store8(T* p, const float* f) {
  if constexpr (sizeof(T) == 4) {
    reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
  } else {
    *reinterpret_cast<uint4*>(p) = pack8<T>(f);
  }
}

// Streaming load that does not allocate in L1 (weights are read once per step). kReadOnly: the
// read-only path (ld.global.nc). ptxas moves read-only loads past a pdl_wait() either way, so a
// load meant to be issued before the wait must be an ordinary one (see gemv1_kernel's kOrdered).
template <bool kReadOnly = true>
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 r;
  if constexpr (kReadOnly)
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
  else
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
  return r;
}

// Brings p's line into L2 without a register result. Safe before pdl_wait() on data a running
// kernel still writes: L2 is where every SM's and peer's stores land, so the line stays coherent.
__device__ __forceinline__ void l2_prefetch(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// x0, x1 rotated by (c, s) (RoPE), each rounding fixed (no contraction left to the compiler) so that
// rope_kv_kernel and the QKV GEMV's epilogue produce the same bits.
__device__ __forceinline__ void rope_rotate(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
  y1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sums V values (a power of two, at most 32) over the warp's lanes in V - 1 + 5 - log2(V) shuffles
// instead of 5 V: each halving step swaps half the values with the lane `o` apart. Lane l returns
// the sum of v[l / (32 / V)] (every lane of a run of 32 / V holds the same one). v is overwritten.
template <int V>
__device__ __forceinline__ float warp_reduce_scatter(float (&v)[V], int lane) {
  static_assert(V >= 1 && V <= 32 && (V & (V - 1)) == 0, "V a power of two up to 32");
  int o = 16;
#pragma unroll
  for (int half = V / 2; half >= 1; half /= 2, o /= 2) {
    const bool hi = lane & o;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = hi ? v[i] : v[i + half], keep = hi ? v[i + half] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
  float s = v[0];
#pragma unroll
  for (; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / maximum over the block; every thread gets the result. `smem` holds >= 32 floats.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < nwarps ? smem[lane] : (kMax ? -INFINITY : 0.f);
  return kMax ? warp_max(v) : warp_sum(v);
}
__device__ __forceinline__ float block_sum(float v, float* smem) { return block_reduce<false>(v, smem); }
__device__ __forceinline__ float block_max(float v, float* smem) { return block_reduce<true>(v, smem); }

// Decode GEMVs of int8/int4 weights read activations as integer codes per block of 32 (gq_int.cu):
// Q = int16_t (scale amax / 32767) or int8_t (amax / 127). Producers (RMSNorm, SwiGLU) write that
// form next to their 16-bit output: each thread holds 8 consecutive output values (already
// rounded to the 16-bit type) at element i (i % 8 == 0), 4 neighbouring lanes one block. Writes
// the 8 codes to xq[i..i+8) (int16 with kNibble: as pairs (0, 4), (1, 5), (2, 6), (3, 7), see GqX)
// and, from the block's first lane, (scale d, sum of x over its first 16, over its last 16, sum
// of codes) to xs[i / 32]. The 4 lanes of a block must call it together.
template <typename Q, bool kNibble = false>
__device__ __forceinline__ void quantize8_to_blocks(const float* v, size_t i, Q* __restrict__ xq,
                                                    float4* __restrict__ xs) {
  constexpr float kMax = sizeof(Q) == 1 ? 127.f : 32767.f;
  const unsigned mask = __activemask();
  float amax = 0.f, sum = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(v[j])), sum += v[j];
  amax = fmaxf(amax, __shfl_xor_sync(mask, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(mask, amax, 2));
  const float d = amax / kMax, inv = d > 0.f ? 1.f / d : 0.f;
  uint32_t w[4] = {0, 0, 0, 0};
  int qsum = 0;  // |sum| <= 32 * 32767: exact as a float too
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = __float2int_rn(v[j] * inv);
    qsum += q;
    if constexpr (sizeof(Q) == 1) w[j / 4] |= (uint32_t(q) & 0xFFu) << (8 * (j % 4));
    else if constexpr (kNibble) w[j % 4] |= (uint32_t(q) & 0xFFFFu) << (16 * (j / 4));
    else w[j / 2] |= (uint32_t(q) & 0xFFFFu) << (16 * (j % 2));
  }
  if constexpr (sizeof(Q) == 1) *reinterpret_cast<uint2*>(xq + i) = make_uint2(w[0], w[1]);
  else *reinterpret_cast<uint4*>(xq + i) = make_uint4(w[0], w[1], w[2], w[3]);
  const float pair = sum + __shfl_xor_sync(mask, sum, 1);  // this half (16) of the block
  const float other = __shfl_xor_sync(mask, pair, 2);
  qsum += __shfl_xor_sync(mask, qsum, 1);
  qsum += __shfl_xor_sync(mask, qsum, 2);
  if ((threadIdx.x & 3) == 0) xs[i / 32] = make_float4(d, pair, other, float(qsum));
}
// The same into the scratch's codes of form GqX::form() (0 int8, 1 int16, 2 int16 nibble order).
__device__ __forceinline__ void quantize8_to_blocks(const float* v, size_t i, void* xq, int form, float4* xs) {
  if (form == 2) quantize8_to_blocks<int16_t, true>(v, i, static_cast<int16_t*>(xq), xs);
  else if (form == 1) quantize8_to_blocks(v, i, static_cast<int16_t*>(xq), xs);
  else quantize8_to_blocks(v, i, static_cast<int8_t*>(xq), xs);
}

inline unsigned ceil_div(long a, long b) { return unsigned((a + b - 1) / b); }

}  // namespace lite_llama::cuda
