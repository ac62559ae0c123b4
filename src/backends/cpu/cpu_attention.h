// Attention over the token-level KV pool on the CPU: every (sequence, head, query chunk) is a
// work item, so both wide decode batches and one long prefill spread over the threads.
#pragma once
#include <vector>

#include "core/thread_pool.h"
#include "ops/ops.h"

namespace lite_llama::cpu {

struct AttnItem {
  int b, h, q0, q1;
};

// items: scratch kept by the caller between steps.
void attention_f32(ThreadPool& pool, const Tensor& q, const ops::KvLayer& kv, const ops::AttnMeta& m,
                   int num_heads, int num_kv_heads, int head_dim, float scale, Tensor out,
                   std::vector<AttnItem>& items);

}  // namespace lite_llama::cpu
