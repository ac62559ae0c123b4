// Shared by the kernel benchmarks: CUDA error checks that exit, device allocation, and the
// device-to-device copy bandwidth every result is stated against.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

inline void* dev_alloc(size_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, bytes));
  return p;
}

// Bytes read + written per second (GB/s) of a device-to-device copy of `bytes`, the median of
// `reps` timed copies on `s` after one warm-up.
inline double copy_bandwidth_gbs(size_t bytes, cudaStream_t s, int reps = 5) {
  void* a = dev_alloc(bytes);
  void* b = dev_alloc(bytes);
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, s));
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float t = 0;
    CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * double(bytes) / double(ms[ms.size() / 2]) / 1e6;
}
