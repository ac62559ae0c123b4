// The GPU a CUDA backend runs on: its properties, the one non-blocking stream every op uses, the
// activation type, and device allocation. Shared by the backend's pieces (weights, linears,
// sampling, graphs) so that each owns only its own state.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/launchers.h"
#include "core/tensor.h"

namespace lite_llama::cuda {

class CudaDevice {
 public:
  explicit CudaDevice(Act act);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  Act act() const { return act_; }
  DType act_dtype() const { return act_ == Act::BF16 ? DType::BF16 : DType::F16; }
  cudaStream_t stream() const { return stream_; }
  const cudaDeviceProp& props() const { return props_; }
  int index() const { return device_; }
  int sm_count() const { return props_.multiProcessorCount; }
  int compute_capability() const { return props_.major * 10 + props_.minor; }
  // Peak DRAM bandwidth from the memory clock and bus width (0 where the driver reports neither).
  double peak_bandwidth_gbs() const { return peak_bandwidth_gbs_; }

  Buffer alloc(size_t bytes);  // fails with a one-line "out of GPU memory" error
  // Host -> device on the stream, waiting for it (a plain cudaMemcpy runs on the legacy stream,
  // which the non-blocking op stream does not wait for).
  void copy_sync(void* dst, const void* src, size_t n);
  void copy_to_host(void* dst, const void* src, size_t n);
  void synchronize();
  bool capturing() const;  // the stream is being captured into a graph

 private:
  Act act_;
  int device_ = 0;
  cudaDeviceProp props_{};
  double peak_bandwidth_gbs_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace lite_llama::cuda
