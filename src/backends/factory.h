// The one place that knows which backends were built.
#pragma once
#include <memory>
#include <string>

#include "ops/ops.h"

namespace lite_llama {

struct BackendOptions {
  std::string device = "auto";  // auto | cpu | cuda
  int threads = 0;              // CPU threads, 0 = all cores
  std::string dtype = "bf16";   // CUDA activation dtype
  std::string quantize = "auto";  // weight storage (core/gq.h QuantMode)
};

bool cuda_built();
bool cuda_available();  // built and a device is present
std::unique_ptr<ops::Backend> make_backend(const BackendOptions& opts);

}  // namespace lite_llama
