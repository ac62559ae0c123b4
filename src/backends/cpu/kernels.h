// The CPU kernels of one instruction set, built once per set (kernels_generic.cpp,
// kernels_avx2.cpp, kernels_avx512.cpp, each with its own flags) and picked at run time.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_isa.h"
#include "core/dtype.h"

namespace lite_llama::cpu {

// One attention work item: the query rows (tokens q0..q1-1 of a sequence x the `group` heads
// from head0 that share one KV head) over keys k0..k1-1 (causal: query token i sits at position
// first_pos + i and sees keys at positions <= its own). Pointers are the batch's: q and o
// [tokens][q_row_stride], K/V rows at slot * kv_row_stride + kv_offset, slots the sequence's
// row of the slot table. With m_out set the result is a partial for a later merge: o holds
// the unnormalised rows [rows][head_dim], m_out / l_out each row's running max and sum.
// kv_heads > 1 (one query token only): the item covers that many consecutive KV heads, rows
// ordered by query head, so each slot row's K/V of those heads is read whole and in order.
struct AttnTile {
  const float* q;
  float* o;
  int64_t q_row_stride;
  const void* k;  // F32 rows, or F16 with kv_f16
  const void* v;
  bool kv_f16;
  int64_t kv_row_stride, kv_offset;
  const int32_t* slots;
  int head_dim, group, head0, q0, q1, first_pos, k0, k1;
  int kv_heads;
  float scale;
  float* m_out;
  float* l_out;
  float* scratch;  // attn_scratch_floats(rows, head_dim, kv_heads)
};

constexpr int kAttnKeyTile = 16;  // keys an attention tile gathers at a time
// Per row: m, l, the output row, one score vector (<= 16 floats) per key and the tile's
// weights; the F16 rows of a key tile widened; room to align two regions to 64 bytes.
inline size_t attn_scratch_floats(int rows, int head_dim, int kv_heads) {
  return size_t(rows) * (head_dim + 2 + 17 * kAttnKeyTile) + 2 * size_t(kAttnKeyTile) * head_dim * kv_heads + 32;
}

// One token's activations as int16 codes per 32-block (gemv_int16.h): x[k] ~ d[b] * q[k] with
// d[b] = amax_b / 32767, |x - d q| <= d / 2. Q4_0 / Q4_1 weights take q in act_i16_element order
// (the order their nibbles unpack in), Q8_0 in natural order.
struct ActI16 {
  int16_t* q;     // [K]
  float* d;       // [K / 32] block scales
  float* sum;     // [K / 32] sums of the unquantised x (Q4_1's m * sum(x) term)
  int32_t* qsum;  // [K / 32] sums of q (Q4_0's exact -8 * sum(q) term)
};

// Element of a 32-block at position p of the Q4 order: four groups of 8 (one per nibble shift
// 0/4/8/12 of a dword), each taking dwords 0-3 and their low and high 16-bit halves.
constexpr int act_i16_element(int p) {
  const int L = p / 8, i = (p % 8) / 2, h = p % 2;
  return 4 * i + 2 * h + (L >> 1) + 16 * (L & 1);
}
// Weight types with an int16-activation GEMV; Q4 types take the Q4 order.
inline bool int16_weight_type(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0; }
inline bool int16_q4_order(DType t) { return t == DType::Q4_0 || t == DType::Q4_1; }

struct Kernels {
  CpuIsa isa;
  // gemm_f32 (gemm_f32.h) for the weight types this set has SIMD tiles for; false for the
  // others, which the caller's plain loop computes. scratch: gemm_scratch_floats(K) floats.
  bool (*gemm)(DType wtype, const void* w, size_t row_stride, int64_t rows, const float* x,
               int64_t T, int64_t K, float* out, int64_t ldo, float* scratch);
  // out[i] = silu(gate[i]) * up[i], i < n.
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
  void (*attend)(const AttnTile& tile);
  // x[K] (K a multiple of 32) to int16 codes, in the Q4 order or the natural one.
  void (*quantize_i16)(const float* x, int64_t K, bool q4_order, const ActI16& out);
  // out[j * ldo + r] = W[r] . x_j for T tokens of int16 codes (token j's codes at x.q + j K, its
  // block values at x.d + j K / 32, ...); a token's result does not depend on T. False for
  // weight types without this path.
  bool (*gemm_i16)(DType wtype, const void* w, size_t row_stride, int64_t rows, const ActI16& x, int T,
                   int64_t K, float* out, int64_t ldo);
};

inline size_t gemm_scratch_floats(int64_t K) { return size_t(2 * K); }

// The kernels of `isa`; a set this build or machine lacks falls back to the next narrower one.
const Kernels& kernels_for(CpuIsa isa);

}  // namespace lite_llama::cpu
