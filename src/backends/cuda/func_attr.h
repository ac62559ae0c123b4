// cudaFuncSetAttribute once per (device, kernel, attribute, value): launchers set a kernel's
// shared-memory size and carveout before each launch, and in eager steps each call is a driver
// call on the host (three a layer for decode attention alone).
#pragma once
#include <cuda_runtime.h>

namespace lite_llama::cuda {

cudaError_t set_func_attr(const void* kernel, cudaFuncAttribute attr, int value);

template <typename... Args>
cudaError_t set_func_attr(void (*kernel)(Args...), cudaFuncAttribute attr, int value) {
  return set_func_attr(reinterpret_cast<const void*>(kernel), attr, value);
}

}  // namespace lite_llama::cuda
