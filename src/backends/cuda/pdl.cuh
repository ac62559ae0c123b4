// Programmatic dependent launch (sm_90+). A kernel launched with launch_pdl may start while the
// previous kernel in the stream still runs, once every block of that kernel has executed
// pdl_trigger(); before pdl_wait() it may only read what no earlier kernel writes (weights), so
// the quantised GEMM fetches its first weight chunks while the norm or SwiGLU before it finishes.
// pdl_wait() waits for the previous kernel's completion and its memory; without PDL both are no-ops.
// The backend decides (CudaTuning::pdl and the GPU's compute capability); launch_pdl(false, ...)
// launches normally.
#pragma once
#include <cuda_runtime.h>

#include <utility>

namespace lite_llama::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

template <typename... KArgs, typename... Args>
cudaError_t launch_pdl(bool pdl, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                       Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr, cfg.numAttrs = pdl ? 1 : 0;
  if (cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...); e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
