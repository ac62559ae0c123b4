// cudaFuncSetAttribute once per (device, kernel, attribute, value): launchers set a kernel's
// shared-memory size and carveout before each launch, and in eager steps each call is a driver
// call on the host (three a layer for decode attention alone). Also the SM count a launcher
// chooses a tiling by.
#pragma once
#include <cuda_runtime.h>

namespace lite_llama::cuda {

cudaError_t set_func_attr(const void* kernel, cudaFuncAttribute attr, int value);

// The current device's SM count, asked of the driver once per device.
cudaError_t device_sm_count(int* sms);

template <typename... Args>
cudaError_t set_func_attr(void (*kernel)(Args...), cudaFuncAttribute attr, int value) {
  return set_func_attr(reinterpret_cast<const void*>(kernel), attr, value);
}

}  // namespace lite_llama::cuda
