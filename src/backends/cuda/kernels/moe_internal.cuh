// Mixture-of-experts kernels shared between moe.cu (routing, sorting, combine, dispatch),
// moe_gemv.cu (decode-sized steps) and moe_gemm.cu (prefill-sized steps, tensor cores).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/common.cuh"

namespace lite_llama::cuda::moe {

// Expert weight rows: WT = T, 16-bit rows of K; or WT = uint8_t, the rows of the dense
// --quantize int8 layout (core/gq.h, per channel): K bytes (int8 code + 128), then the row's fp16
// (scale s, offset m) padded to 16 bytes, weight = s code + m. Both are read 16 bytes at a time.
template <typename WT>
constexpr bool kInt8Rows = std::is_same_v<WT, uint8_t>;
template <typename WT>
__host__ __device__ constexpr size_t row_bytes(int K) {
  return kInt8Rows<WT> ? size_t(K) + 16 : size_t(K) * sizeof(WT);
}
// Weights per 16-byte load.
template <typename WT>
constexpr int kLoadCols = 16 / int(sizeof(WT));

// An int8 row's (s, m - 1152 s): the 0x6400 exponent trick turns a code byte b into the fp16
// 1024 + b, and (1024 + b) s + m - 1152 s = s (b - 128) + m.
__device__ __forceinline__ float2 int8_row_params(const uint8_t* row, int K) {
  const float2 sm = __half22float2(*reinterpret_cast<const __half2*>(row + K));
  return make_float2(sm.x, fmaf(-1152.f, sm.x, sm.y));
}
// Weights 8 h .. 8 h + 7 of a 16-byte load of WT: 16-bit values as they are, int8 codes through
// the row's params p (int8_row_params).
template <typename T, typename WT>
__device__ __forceinline__ void dequant8(const uint4& q, int h, float2 p, float* f) {
  if constexpr (kInt8Rows<WT>) {
    const uint32_t v[2] = {h ? q.z : q.x, h ? q.w : q.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t bits = __byte_perm(v[j >> 1], 0x64646464u, (j & 1) ? 0x4342 : 0x4140);
      __half2 hv;
      memcpy(&hv, &bits, 4);
      const float2 c = __half22float2(hv);
      f[2 * j] = fmaf(c.x, p.x, p.y), f[2 * j + 1] = fmaf(c.y, p.x, p.y);
    }
  } else {
    (void)h, (void)p;
    unpack8<T>(q, f);
  }
}

// Steps of up to this many token-expert assignments take the GEMV path (no sort: each block
// gathers its expert's assignments itself); larger ones are sorted by expert for the GEMM.
constexpr int kGemvMaxAssign = 1024;
// GEMM tiles: kTileM assignments of one expert x kTileN weight rows.
constexpr int kTileM = 64, kTileN = 64;

// Most tiles of kTileM sorted slots n assignments over `experts` experts can need.
inline int max_tiles(int n, int experts) { return (n + kTileM - 1) / kTileM + (n < experts ? n : experts); }

// out[a, r] = W[e(a), r, :] . x(a) for every assignment a < n (e(a) = t_expert[a]):
// x(a) = in[a / top_k] (hidden states, K wide) when !swiglu, else silu(g) * u of gate_up row a
// ([g(K) | u(K)]), rounded to T as the dense SwiGLU rounds it. T: __half or __nv_bfloat16;
// WT: T or uint8_t (int8 rows, see above; K % 32 == 0); O: T or float.
template <typename T, typename WT, typename O>
cudaError_t gemv(const WT* W, int N, int K, const T* in, bool swiglu, int top_k, const int32_t* t_expert, int n,
                 int experts, O* out, cudaStream_t s);

// out[slot, r] = W[e, r, :] . x(slot) over the sorted slots, one block per (tile, kTileN rows):
// tiles[2 i] = expert, tiles[2 i + 1] = first slot of tile i, its slots end at
// min(first + kTileM, start[e + 1]); *n_tiles tiles exist (the grid has max_tiles of them).
// x(slot) = in[order[slot] / top_k] with `order`, else in[slot]. K % 8 == 0 (int8 rows: 32).
template <typename T, typename WT, typename O>
cudaError_t gemm(const WT* W, int N, int K, const T* in, const int32_t* order, int top_k, const int32_t* tiles,
                 const int32_t* n_tiles, const int32_t* start, int grid_tiles, O* out, cudaStream_t s);

}  // namespace lite_llama::cuda::moe
