// The mixture-of-experts ops on the CPU: routing, and the experts over their tokens: rows
// gathered by expert, then the dense layers' kernels on each expert's rows (so quantised experts
// use the same dot products as dense layers), then a weighted combine per token.
#pragma once
#include <functional>

#include "backends/cpu/kernels.h"
#include "core/thread_pool.h"
#include "ops/ops.h"

namespace lite_llama::cpu {

void moe_route_f32(ThreadPool& pool, const Tensor& logits, int top_k, bool norm_topk_prob,
                   int32_t* t_expert, float* t_weight);

size_t moe_workspace_f32(int max_tokens, int top_k, const ops::MoeExperts& w);

// `linear` empty: the fp32-activation kernels (gemm_f32), every active expert's rows in one
// parallel pass per projection; else that linear per expert (the int8-activation path).
// k: the backend's kernel set (CpuTuning::isa), not the best the CPU has.
using LinearFn = std::function<void(const Tensor& x, const ops::Linear& w, Tensor out)>;
using SwigluFn = std::function<void(const Tensor& gate_up, Tensor out)>;
void moe_experts_f32(ThreadPool& pool, const Kernels& k, const Tensor& x, const ops::MoeExperts& w,
                     const int32_t* t_expert, const float* t_weight, int top_k, void* workspace,
                     Tensor out, const LinearFn& linear, const SwigluFn& swiglu);

}  // namespace lite_llama::cpu
