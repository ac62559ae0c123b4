// Weights on the CPU: used in their file type where a kernel reads it (mmap, no copy); the few
// types without CPU kernels are converted once at load.
#pragma once
#include <vector>

#include "core/thread_pool.h"
#include "ops/ops.h"

namespace lite_llama::cpu {

// The tensor to compute with: `host` itself, or a converted copy owned by a new buffer in keep.
Tensor prepare_cpu_weight(ThreadPool& pool, const Tensor& host, std::vector<Buffer>& keep);

}  // namespace lite_llama::cpu
