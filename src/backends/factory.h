// The one place that knows which backends were built.
#pragma once
#include <memory>

#include "lite_llama/backend_options.h"
#include "ops/ops.h"

namespace lite_llama {

bool cuda_built();
bool cuda_available();  // built and a device is present
std::unique_ptr<ops::Backend> make_backend(const BackendOptions& opts);

}  // namespace lite_llama
