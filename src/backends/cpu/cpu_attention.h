// Attention over the token-level KV pool on the CPU. Work items are (sequence, KV head, chunk of
// query tokens, range of keys): the heads sharing a KV head read each K/V row once, a long
// prefill spreads over query chunks, and a short batch (a lone decode) over key ranges whose
// partial softmax results are merged by log-sum-exp, so every thread has work at any context.
// A one-token chunk's item takes several KV heads where there are items enough for the threads,
// so that it reads whole slot rows in address order.
#pragma once
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/thread_pool.h"
#include "ops/ops.h"

namespace lite_llama::cpu {

struct AttnItem {
  int b, g, q0, q1, k0, k1;
  int64_t partial = -1;  // offset of its partial result in AttnScratch::partials, or -1
  int heads = 1;         // KV heads g.. g + heads - 1 (more than one for a lone query token)
};

// Kept by the caller between steps so that a step allocates nothing once warmed up.
struct AttnScratch {
  std::vector<AttnItem> items;
  std::vector<float> partials;
  std::vector<int> splits;  // key ranges per sequence
};

void attention_f32(ThreadPool& pool, const Kernels& k, const Tensor& q, const ops::KvLayer& kv,
                   const ops::AttnMeta& m, int num_heads, int num_kv_heads, int head_dim,
                   float scale, Tensor out, AttnScratch& scratch);

}  // namespace lite_llama::cpu
