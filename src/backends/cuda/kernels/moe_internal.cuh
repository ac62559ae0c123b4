// Mixture-of-experts kernels shared between moe.cu (routing, sorting, combine, dispatch),
// moe_gemv.cu (decode-sized steps) and moe_gemm.cu (prefill-sized steps, tensor cores).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/gq_common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda::moe {

// Expert weight kinds: k16Bit rows of the activation type T, or the GQ kinds kInt8 / kInt4 / kFp8
// (gq_common.cuh) in the dense layout of core/gq.h: the row's codes (int8: code + 128, one byte a
// weight; fp8: e4m3, one byte a weight; int4: the nibble order of gq.h, 8 weights a 32-bit word),
// then one fp16 (s, m) pair per group of weights, padded to 16 bytes; weight = s code + m.
constexpr int k16Bit = -1;

// A stacked expert matrix [E, N, K]: expert e's row r starts at data + (e N + r) row_bytes. A GQ
// row's (s, m) of weight k is the 32-bit word k >> gshift after its codes (gshift 31: one per
// row; groups are powers of two, at least one 16-byte load of codes: 16 8-bit or 32 int4 weights).
struct Rows {
  const uint8_t* data;
  size_t row_bytes;
  int gshift;
};
// Weights per 16 bytes of a row's codes.
template <int KIND>
constexpr int kLoadCols = KIND == kInt4 ? 32 : KIND == k16Bit ? 8 : 16;
// Bytes of codes in a row of K weights (16-bit: the whole row).
template <int KIND>
__host__ __device__ constexpr size_t code_bytes(int K) {
  return size_t(K) * 16 / kLoadCols<KIND>;
}

// Weights 8 h .. 8 h + 7 of a 16-byte load q of codes: 16-bit values as they are, GQ codes as
// the dense GEMV dequantises them (gq_common.cuh: rounded to T once), p their group's params.
template <typename T, int KIND>
__device__ __forceinline__ void dequant8(const uint4& q, int h, const Params& p, float* f) {
  if constexpr (KIND == k16Bit) {
    (void)h, (void)p;
    unpack8<T>(q, f);
  } else {
    const uint4 w = make_uint4(dequant_pair<T, KIND>(q, 4 * h, p), dequant_pair<T, KIND>(q, 4 * h + 1, p),
                               dequant_pair<T, KIND>(q, 4 * h + 2, p), dequant_pair<T, KIND>(q, 4 * h + 3, p));
    unpack8<T>(w, f);
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
// KIND: see above (GQ rows: K % 32 == 0); O: T or float.
template <typename T, int KIND, typename O>
cudaError_t gemv(const Rows& W, int N, int K, const T* in, bool swiglu, int top_k, const int32_t* t_expert, int n,
                 int experts, O* out, cudaStream_t s, const MoeGemvTuning& t);

// out[slot, r] = W[e, r, :] . x(slot) over the sorted slots, one block per (tile, kTileN rows):
// tiles[2 i] = expert, tiles[2 i + 1] = first slot of tile i, its slots end at
// min(first + kTileM, start[e + 1]); *n_tiles tiles exist (the grid has max_tiles of them).
// x(slot) = in[order[slot] / top_k] with `order`, else in[slot]. K % 8 == 0 (GQ rows: 32).
template <typename T, int KIND, typename O>
cudaError_t gemm(const Rows& W, int N, int K, const T* in, const int32_t* order, int top_k, const int32_t* tiles,
                 const int32_t* n_tiles, const int32_t* start, int grid_tiles, O* out, cudaStream_t s);

}  // namespace lite_llama::cuda::moe
