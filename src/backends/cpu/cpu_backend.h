// The CPU backend: fp32 activations, weights used in their file type (mmap), multithreaded.
#pragma once
#include <memory>

#include "backends/cpu/cpu_tp_group.h"
#include "core/thread_pool.h"
#include "lite_llama/backend_options.h"
#include "ops/ops.h"

namespace lite_llama::cpu {

// `group` (may be null: one rank) joins this backend as rank `rank` of a tensor-parallel group.
std::unique_ptr<ops::Backend> make_cpu_backend(int num_threads, const CpuTuning& tuning = {},
                                               std::shared_ptr<CpuTpGroup> group = nullptr, int rank = 0);

}  // namespace lite_llama::cpu
