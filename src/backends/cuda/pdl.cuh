// Programmatic dependent launch (sm_90+). A kernel launched with launch_pdl may start while the
// previous kernel in the stream still runs, once every block of that kernel has executed
// pdl_trigger(); before pdl_wait() it may only read what no earlier kernel writes (weights), so
// the quantised GEMVs fetch their first weights while the norm or SwiGLU before them finishes.
// pdl_wait() waits for the previous kernel's completion and its memory; without PDL both are no-ops.
// LITE_LLAMA_PDL=0 launches normally.
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

bool pdl_enabled();  // compute capability >= 9 and LITE_LLAMA_PDL != 0

// `cluster`: thread-block cluster dimensions (sm_90), (1, 1, 1) for none.
template <typename... KArgs, typename... Args>
cudaError_t launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, dim3 cluster,
                       Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x, attr[n].val.clusterDim.y = cluster.y, attr[n++].val.clusterDim.z = cluster.z;
  }
  cfg.attrs = attr, cfg.numAttrs = n;
  if (cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...); e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
