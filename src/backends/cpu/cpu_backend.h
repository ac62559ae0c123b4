// The CPU backend: fp32 activations, weights used in their file type (mmap), multithreaded.
#pragma once
#include <memory>

#include "core/thread_pool.h"
#include "lite_llama/backend_options.h"
#include "ops/ops.h"

namespace lite_llama::cpu {

std::unique_ptr<ops::Backend> make_cpu_backend(int num_threads, const CpuTuning& tuning = {});

}  // namespace lite_llama::cpu
