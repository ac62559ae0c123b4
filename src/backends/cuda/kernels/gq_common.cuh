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

// Warps of an 8-warp block that share one row group of a decode GEMV (a power of two): enough
// that each lane has about `unroll` chunks of the row, and more while the grid would give the
// GPU fewer than ~4 blocks per SM (small projections: o_proj, k/v). `lanes`: lanes of a warp on
// one row; `rows`: rows one warp computes.
inline int gemv_warps_per_row(int chunks, int N, int lanes, int rows, int unroll) {
  constexpr int kBlockWarps = 8;
  int wpr = 1;
  while (wpr < kBlockWarps && chunks > wpr * lanes * unroll) wpr *= 2;
  while (wpr < kBlockWarps && int64_t(N) * wpr / (rows * kBlockWarps) < 4 * sm_count() && chunks >= wpr * 2 * lanes)
    wpr *= 2;
  return wpr;
}

}  // namespace
}  // namespace lite_llama::cuda
