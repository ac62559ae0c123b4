// The host's Backend::score_rows for one row: the reference the CUDA kernel is tested against, the
// CPU backend's implementation and the sampler's logprobs.
#pragma once
#include <cstdint>

#include "ops/sample_row.h"

namespace lite_llama::ops {

// Over x[0..n): the log-softmax value and rank of x[target] (-inf and the rank of -inf where target
// is outside [0, n)), the argmax, and the k best (k <= n) into top[0..k).
void score_row(const float* x, int64_t n, int32_t target, int k, RowScore* out, TopToken* top);

}  // namespace lite_llama::ops
