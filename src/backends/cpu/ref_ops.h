// Reference CPU ops: plain fp32 loops written for clarity, not speed. They are the ground truth
// for the fast CPU paths and for every CUDA kernel test.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "ops/ops.h"

namespace lite_llama::cpu::ref {

void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* out);
// residual += x; out = rms_norm(residual) * w
void add_rms_norm(float* residual, const float* x, const float* w, float eps, int64_t rows,
                  int64_t n, float* out);
// out[t, n] = sum_k x[t, k] * W[n, k] + bias[n]; W rows dequantised with dequantize_row.
void linear(const float* x, int64_t T, int64_t K, const void* w, DType wtype, int64_t N,
            const float* bias, float* out, int64_t ldo);
// Rotates the first rot_dim dims of each head at position pos with base theta-derived table.
void rope(float* x, int64_t heads, int64_t head_dim, const float* cos_sin, int rot_dim,
          ops::RopeLayout layout);
void swiglu(const float* gate_up, int64_t T, int64_t F, float* out);
// One query head over `n` keys/values rows (each row of head_dim); causal masking is the
// caller's job (it passes only visible rows).
void attend(const float* q, const float* const* k_rows, const float* const* v_rows, int n,
            int head_dim, float scale, float* out);
// Mixture-of-experts router over logits[T, E]: softmax in double, the top_k experts by
// probability (descending, lowest index on ties), renormalised to sum 1 when norm_topk_prob.
void moe_route(const float* logits, int64_t T, int E, int top_k, bool norm_topk_prob,
               int32_t* expert, float* weight);
// out[t] = sum over j, in ascending expert order, of weight[t, j] * down(silu(gate x) * up x)
// for expert[t, j], with the expert matrices dequantised row by row (w's per-expert lists).
void moe_experts(const float* x, int64_t T, const ops::MoeExperts& w, const int32_t* expert,
                 const float* weight, int top_k, float* out);
// RoPE table rows [pos][rot_dim]: cos then sin of pos * inv_freq[i].
void rope_table(const float* inv_freq, int rot_dim, int64_t max_pos, float* out);

}  // namespace lite_llama::cpu::ref
