// Pieces shared by the quantised (GQ) kernels: the GEMV / dequantiser (gq.cu) and the
// tensor-core GEMM (gq_mma.cu).
#pragma once
#include "backends/cuda/common.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kInt8 = 0, kInt4 = 1, kFp8 = 2;  // GqArgs::kind (GqKind order)

__device__ __forceinline__ __half2 as_half2(uint32_t v) {
  __half2 h;
  memcpy(&h, &v, 4);
  return h;
}

// log2 of a group size (groups are powers of two), 31 for per channel ((k >> 31) == 0 for every
// k); -1 for any other size.
inline int group_shift(int group) {
  if (group == 0) return 31;
  int sh = 0;
  while ((1 << sh) < group) ++sh;
  return (1 << sh) == group ? sh : -1;
}

inline int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 100;
  }();
  return sms;
}

}  // namespace
}  // namespace lite_llama::cuda
