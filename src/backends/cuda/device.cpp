#include "backends/cuda/device.h"

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {

CudaDevice::CudaDevice(Act act) : act_(act) {
  LL_CUDA(cudaGetDevice(&device_));
  LL_CUDA(cudaGetDeviceProperties(&props_, device_));
  // bf16 math, cp.async and the mma.sync shapes of the kernels need sm_80 (built for 80 and 90).
  LL_CHECK(props_.major >= 8, "{} has compute capability {}.{}; lite-llama's CUDA kernels need 8.0 or newer "
           "(use --device cpu)", props_.name, props_.major, props_.minor);
  int mem_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device_) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device_) == cudaSuccess)
    peak_bandwidth_gbs_ = 2.0 * mem_khz * 1e3 * (bus_bits / 8) / 1e9;  // double data rate
  cudaGetLastError();
  LL_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaDevice::~CudaDevice() { cudaStreamDestroy(stream_); }

Buffer CudaDevice::alloc(size_t bytes) {
  void* p = nullptr;
  if (bytes) {
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      fail("out of GPU memory allocating {:.1f} MiB ({})", double(bytes) / (1 << 20), cudaGetErrorString(e));
    }
  }
  return Buffer(p, bytes, Device::CUDA, [](void* q) { cudaFree(q); });
}

void CudaDevice::copy_sync(void* dst, const void* src, size_t n) {
  LL_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_));
  LL_CUDA(cudaStreamSynchronize(stream_));
}

void CudaDevice::copy_to_host(void* dst, const void* src, size_t n) {
  LL_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_));
  LL_CUDA(cudaStreamSynchronize(stream_));
}

void CudaDevice::synchronize() { LL_CUDA(cudaStreamSynchronize(stream_)); }

bool CudaDevice::capturing() const {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  LL_CUDA(cudaStreamIsCapturing(stream_, &cs));
  return cs != cudaStreamCaptureStatusNone;
}

}  // namespace lite_llama::cuda
