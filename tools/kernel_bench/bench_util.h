// Shared by the kernel benchmarks: CUDA error checks that exit, device allocation, and the
// device-to-device copy bandwidth every result is stated against.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
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

// Median milliseconds of `reps` runs of fn() on stream s, each between two events (warm-ups are
// the caller's).
template <class F>
double median_ms(cudaStream_t s, int reps, F&& fn) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, s));
    fn();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float t = 0;
    CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms[ms.size() / 2];
}

// Microseconds per call: `calls` calls of fn(i) captured in one CUDA graph on s (relaxed capture:
// launchers may set function attributes), median of `reps` replays after a warm-up. No host launch
// latency inside the time, which one call between two events includes.
inline double graph_us(cudaStream_t s, const std::function<void(int)>& fn, int calls, int reps) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < calls; ++i) fn(i);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphLaunch(exec, s));
  CK(cudaStreamSynchronize(s));
  const double ms = median_ms(s, reps, [&] { CK(cudaGraphLaunch(exec, s)); });
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  return ms * 1e3 / calls;
}

// Bytes read + written per second (GB/s) of a device-to-device copy of `bytes`, the median of
// `reps` timed copies on `s` after one warm-up.
inline double copy_bandwidth_gbs(size_t bytes, cudaStream_t s, int reps = 5) {
  void* a = dev_alloc(bytes);
  void* b = dev_alloc(bytes);
  CK(cudaMemset(a, 1, bytes));
  CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
  const double ms = median_ms(s, reps, [&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); });
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * double(bytes) / ms / 1e6;
}
