// RMSNorm and the fused residual-add + RMSNorm (the seed's skip_rmsnorm): one block per row,
// fp32 statistics, 16-bit in/out.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPerThread = 8 * 4;  // rows up to 256 * 32 = 8192 elements stay in registers

// When `residual` is given: residual += x (rounded to T, as the model's residual stream is T),
// then the row statistics come from the updated residual.
template <typename T, bool kAdd>
__global__ void __launch_bounds__(kThreads) norm_kernel(T* residual, const T* __restrict__ x,
                                                        const float* __restrict__ w, float eps,
                                                        T* __restrict__ out, int n, int8_t* __restrict__ xq,
                                                        float4* __restrict__ xs) {
  __shared__ float red[32];
  pdl_trigger();  // a quantised GEMV after this may start fetching its weights
  const size_t row = blockIdx.x;
  const T* xr = x + row * n;
  T* rr = kAdd ? residual + row * n : nullptr;
  float v[kMaxPerThread];
  float ss = 0.f;
  if (n % 8 == 0 && n <= kThreads * kMaxPerThread) {
    // Compile-time chunk indices keep v[] in registers.
#pragma unroll
    for (int c = 0; c < kMaxPerThread / 8; ++c) {
      const int i = (c * kThreads + threadIdx.x) * 8;
      if (i >= n) break;
      float a[8];
      unpack8<T>(*reinterpret_cast<const uint4*>(xr + i), a);
      if (kAdd) {
        float b[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(rr + i), b);
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] = to_f(from_f<T>(a[j] + b[j]));
        *reinterpret_cast<uint4*>(rr + i) = pack8<T>(a);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[c * 8 + j] = a[j];
        ss += a[j] * a[j];
      }
    }
    const float inv = rsqrtf(block_sum(ss, red) / float(n) + eps);
#pragma unroll
    for (int c = 0; c < kMaxPerThread / 8; ++c) {
      const int i = (c * kThreads + threadIdx.x) * 8;
      if (i >= n) break;
      float o[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = v[c * 8 + j] * inv * w[i + j];
      const uint4 packed = pack8<T>(o);
      *reinterpret_cast<uint4*>(out + row * n + i) = packed;
      if (xq) {  // the int8 form for a following quantised GEMV (n % 32 == 0 here)
        unpack8<T>(packed, o);
        quantize8_to_blocks(o, row * n + i, xq, xs);
      }
    }
    return;
  }
  // Generic path: two passes over global memory.
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float a = to_f(xr[i]);
    if (kAdd) {
      a = to_f(from_f<T>(a + to_f(rr[i])));
      rr[i] = from_f<T>(a);
    }
    ss += a * a;
  }
  const float inv = rsqrtf(block_sum(ss, red) / float(n) + eps);
  const T* src = kAdd ? rr : xr;
  for (int i = threadIdx.x; i < n; i += kThreads) out[row * n + i] = from_f<T>(to_f(src[i]) * inv * w[i]);
}

template <bool kAdd>
cudaError_t launch(Act act, void* residual, const void* x, const float* w, float eps, void* out,
                   int rows, int n, void* xq_scratch, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  int8_t* xq = nullptr;
  float4* xs = nullptr;
  if (xq_scratch) {
    if (!norm_quantizes_x(rows, n)) return cudaErrorInvalidValue;
    gq_x_views(xq_scratch, &xq, &xs);
  }
  if (act == Act::BF16)
    norm_kernel<__nv_bfloat16, kAdd><<<rows, kThreads, 0, s>>>(
        static_cast<__nv_bfloat16*>(residual), static_cast<const __nv_bfloat16*>(x), w, eps,
        static_cast<__nv_bfloat16*>(out), n, xq, xs);
  else
    norm_kernel<__half, kAdd><<<rows, kThreads, 0, s>>>(static_cast<__half*>(residual),
                                                        static_cast<const __half*>(x), w, eps,
                                                        static_cast<__half*>(out), n, xq, xs);
  return cudaGetLastError();
}

}  // namespace

bool norm_quantizes_x(int rows, int n) {
  return rows <= kGqGemvMaxTokens && n % 32 == 0 && n <= kThreads * kMaxPerThread;
}

cudaError_t rms_norm(Act act, const void* x, const float* w, float eps, void* out, int rows, int n,
                     cudaStream_t s, void* xq_scratch) {
  return launch<false>(act, nullptr, x, w, eps, out, rows, n, xq_scratch, s);
}

cudaError_t add_rms_norm(Act act, void* residual, const void* x, const float* w, float eps, void* out,
                         int rows, int n, cudaStream_t s, void* xq_scratch) {
  return launch<true>(act, residual, x, w, eps, out, rows, n, xq_scratch, s);
}

}  // namespace lite_llama::cuda
