// The one place that knows which backends were built.
#pragma once
#include <memory>
#include <vector>

#include "lite_llama/backend_options.h"
#include "ops/ops.h"

namespace lite_llama {

bool cuda_built();
bool cuda_available();  // built and a device is present
std::unique_ptr<ops::Backend> make_backend(const BackendOptions& opts);
// One backend per tensor-parallel rank, joined for collectives: on CUDA rank r runs on device r
// and they talk through NCCL; on the CPU they share memory and opts.threads (each rank gets
// its share, at least one). tp == 1 gives make_backend's. Rank r's backend is then used from
// one thread only, after bind_thread().
std::vector<std::unique_ptr<ops::Backend>> make_backends(const BackendOptions& opts, int tp);

}  // namespace lite_llama
