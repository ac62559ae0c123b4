// Mixture-of-experts kernels shared between moe.cu (routing, sorting, combine, dispatch),
// moe_gemv.cu (decode-sized steps) and moe_gemm.cu (prefill-sized steps, tensor cores).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace lite_llama::cuda::moe {

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
// O: T or float.
template <typename T, typename O>
cudaError_t gemv(const T* W, int N, int K, const T* in, bool swiglu, int top_k, const int32_t* t_expert, int n,
                 int experts, O* out, cudaStream_t s);

// out[slot, r] = W[e, r, :] . x(slot) over the sorted slots, one block per (tile, kTileN rows):
// tiles[2 i] = expert, tiles[2 i + 1] = first slot of tile i, its slots end at
// min(first + kTileM, start[e + 1]); *n_tiles tiles exist (the grid has max_tiles of them).
// x(slot) = in[order[slot] / top_k] with `order`, else in[slot]. K % 8 == 0.
template <typename T, typename O>
cudaError_t gemm(const T* W, int N, int K, const T* in, const int32_t* order, int top_k, const int32_t* tiles,
                 const int32_t* n_tiles, const int32_t* start, int grid_tiles, O* out, cudaStream_t s);

}  // namespace lite_llama::cuda::moe
