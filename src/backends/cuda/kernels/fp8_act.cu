// FP8 W8A8 (cuBLASLt, sm_89+): the per-token activation quantiser and the per-row weight scales
// that the GEMM applies as outer-vector scales (gemm.cpp, Gemm::run_fp8).
#include <cuda_fp8.h>

#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: amax over the row, then codes = e4m3(x * 448 / amax) and scale amax / 448
// (a zero row gets scale 0 and zero codes). The second pass re-reads the row from L2.
template <typename T>
__global__ void __launch_bounds__(kThreads) quantize_rows_fp8_kernel(const T* __restrict__ x, int K,
                                                                     uint8_t* __restrict__ codes,
                                                                     float* __restrict__ scales) {
  __shared__ float red[32];
  const T* xr = x + size_t(blockIdx.x) * K;
  uint8_t* cr = codes + size_t(blockIdx.x) * K;
  float amax = 0.f;
  for (int i = threadIdx.x * 8; i < K; i += kThreads * 8) {
    float f[8];
    unpack8<T>(*reinterpret_cast<const uint4*>(xr + i), f);
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(f[j]));
  }
  amax = block_max(amax, red);
  const float inv = amax > 0.f ? 448.f / amax : 0.f;
  if (threadIdx.x == 0) scales[blockIdx.x] = amax / 448.f;
  for (int i = threadIdx.x * 8; i < K; i += kThreads * 8) {
    float f[8];
    unpack8<T>(*reinterpret_cast<const uint4*>(xr + i), f);
    uint32_t w[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(f[4 * h] * inv, f[4 * h + 1] * inv),
                                                   __NV_SATFINITE, __NV_E4M3);
      const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(f[4 * h + 2] * inv, f[4 * h + 3] * inv),
                                                   __NV_SATFINITE, __NV_E4M3);
      w[h] = lo | (hi << 16);
    }
    *reinterpret_cast<uint2*>(cr + i) = make_uint2(w[0], w[1]);
  }
}

__global__ void gq_row_scales_kernel(const uint8_t* __restrict__ w, size_t rb, size_t code_bytes, int N,
                                     float* __restrict__ out) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) out[n] = __half2float(*reinterpret_cast<const __half*>(w + size_t(n) * rb + code_bytes));
}

}  // namespace

cudaError_t quantize_rows_fp8(Act act, const void* x, int T, int K, void* codes, float* scales, cudaStream_t s) {
  if (K % 8 != 0) return cudaErrorInvalidValue;
  if (T == 0) return cudaSuccess;
  auto* c = static_cast<uint8_t*>(codes);
  if (act == Act::BF16)
    quantize_rows_fp8_kernel<__nv_bfloat16><<<T, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x), K, c, scales);
  else
    quantize_rows_fp8_kernel<__half><<<T, kThreads, 0, s>>>(static_cast<const __half*>(x), K, c, scales);
  return cudaGetLastError();
}

cudaError_t gq_row_scales(const void* w, size_t row_bytes, size_t code_bytes, int N, float* out, cudaStream_t s) {
  if (N == 0) return cudaSuccess;
  gq_row_scales_kernel<<<ceil_div(N, 256), 256, 0, s>>>(static_cast<const uint8_t*>(w), row_bytes, code_bytes, N,
                                                        out);
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
