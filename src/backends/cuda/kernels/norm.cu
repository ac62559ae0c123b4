// RMSNorm and the fused residual-add + RMSNorm (the seed's skip_rmsnorm): one block per row,
// fp32 statistics; the residual stream in fp32 or 16-bit, the normalised output 16-bit.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxPerThread = 8 * 4;  // rows up to 256 * 32 = 8192 elements stay in registers
constexpr int kEarlyRows = 512;       // steps of up to this many rows take norm_kernel<..., kEarly>

// kAdd: residual (R) += x (X), rounded to R (fp32 or the activation type), then the row
// statistics come from the updated residual. Without kAdd the input x is of type R. `out` is T.
// kEarly (small steps, kEarlyRows): the norm weights are loaded into registers before pdl_wait().
// That takes 81 registers instead of 63 (3 blocks an SM instead of 4); with the same change in the
// RoPE kernel, 1,024- and 8,192-token prefill steps were 2-5% slower, so large steps read the
// weights after the statistics as before.
template <typename T, typename R, typename X, bool kAdd, bool kEarly>
__global__ void __launch_bounds__(kThreads) norm_kernel(R* residual, const void* xv,
                                                        const float* __restrict__ w, float eps,
                                                        T* __restrict__ out, int n, void* __restrict__ xq,
                                                        int form, float4* __restrict__ xs) {
  __shared__ float red[32];
  pdl_trigger();  // a quantised GEMV after this may start fetching its weights
  // x is not __restrict__: a read-only load of it could be scheduled above pdl_wait().
  const size_t row = blockIdx.x;
  const X* xr = static_cast<const X*>(xv) + row * n;
  R* rr = kAdd ? residual + row * n : nullptr;
  float v[kMaxPerThread];
  float ss = 0.f;
  if (n % 8 == 0 && n <= kThreads * kMaxPerThread) {
    // Before the wait (launched with PDL, the projection before it may still run): the norm
    // weights, which no kernel writes, into registers, and the residual row into L2 (coherent: the
    // kernel that writes it writes through L2), so neither costs a DRAM trip after the wait.
    float wr[kMaxPerThread];  // unused (no registers) without kEarly
    if constexpr (kEarly) {
#pragma unroll
      for (int c = 0; c < kMaxPerThread / 8; ++c) {
        const int i = (c * kThreads + threadIdx.x) * 8;
        if (i >= n) break;
        *reinterpret_cast<float4*>(wr + c * 8) = *reinterpret_cast<const float4*>(w + i);
        *reinterpret_cast<float4*>(wr + c * 8 + 4) = *reinterpret_cast<const float4*>(w + i + 4);
        if (kAdd) l2_prefetch(rr + i);
      }
    }
    pdl_wait();  // launched with PDL: the projection before it is complete only now
    // Compile-time chunk indices keep v[] in registers.
#pragma unroll
    for (int c = 0; c < kMaxPerThread / 8; ++c) {
      const int i = (c * kThreads + threadIdx.x) * 8;
      if (i >= n) break;
      float a[8];
      load8<X>(xr + i, a);
      if (kAdd) {
        float b[8];
        load8<R>(rr + i, b);
#pragma unroll
        for (int j = 0; j < 8; ++j) a[j] = to_f(from_f<R>(a[j] + b[j]));
        store8<R>(rr + i, a);
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
      for (int j = 0; j < 8; ++j) o[j] = v[c * 8 + j] * inv * (kEarly ? wr[c * 8 + j] : w[i + j]);
      const uint4 packed = pack8<T>(o);
      *reinterpret_cast<uint4*>(out + row * n + i) = packed;
      if (xq) {  // the integer form for a following quantised GEMV (n % 32 == 0 here)
        unpack8<T>(packed, o);
        quantize8_to_blocks(o, row * n + i, xq, form, xs);
      }
    }
    return;
  }
  pdl_wait();
  // Generic path: two passes over global memory.
  for (int i = threadIdx.x; i < n; i += kThreads) {
    float a = to_f(xr[i]);
    if (kAdd) {
      a = to_f(from_f<R>(a + to_f(rr[i])));
      rr[i] = from_f<R>(a);
    }
    ss += a * a;
  }
  const float inv = rsqrtf(block_sum(ss, red) / float(n) + eps);
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float a = kAdd ? to_f(rr[i]) : to_f(xr[i]);
    out[row * n + i] = from_f<T>(a * inv * w[i]);
  }
}

// The residual and the added x: both fp32, both T, or an fp32 residual and a T x.
template <typename T, bool kAdd, bool kEarly>
cudaError_t launch_typed(bool f32_residual, bool f32_x, void* residual, const void* x, const float* w, float eps,
                         void* out, int rows, int n, void* xq, int form, float4* xs, cudaStream_t s, bool pdl) {
  T* o = static_cast<T*>(out);
  const dim3 grid(rows), block(kThreads);
  if (f32_residual && (f32_x || !kAdd))
    return launch_pdl(pdl, norm_kernel<T, float, float, kAdd, kEarly>, grid, block, 0, s, static_cast<float*>(residual),
                      x, w, eps, o, n, xq, form, xs);
  if (f32_residual)
    return launch_pdl(pdl, norm_kernel<T, float, T, kAdd, kEarly>, grid, block, 0, s, static_cast<float*>(residual), x,
                      w, eps, o, n, xq, form, xs);
  return launch_pdl(pdl, norm_kernel<T, T, T, kAdd, kEarly>, grid, block, 0, s, static_cast<T*>(residual), x, w, eps,
                    o, n, xq, form, xs);
}

template <typename T, bool kAdd>
cudaError_t launch_rows(bool f32_residual, bool f32_x, void* residual, const void* x, const float* w, float eps,
                        void* out, int rows, int n, void* xq, int form, float4* xs, cudaStream_t s, bool pdl) {
  if (rows <= kEarlyRows)
    return launch_typed<T, kAdd, true>(f32_residual, f32_x, residual, x, w, eps, out, rows, n, xq, form, xs, s, pdl);
  return launch_typed<T, kAdd, false>(f32_residual, f32_x, residual, x, w, eps, out, rows, n, xq, form, xs, s, pdl);
}

template <bool kAdd>
cudaError_t launch(Act act, bool f32_residual, bool f32_x, void* residual, const void* x, const float* w,
                   float eps, void* out, int rows, int n, GqX gx, cudaStream_t s, bool pdl) {
  if (f32_x && !f32_residual) return cudaErrorInvalidValue;  // an fp32 x adds to an fp32 residual only
  if (rows == 0) return cudaSuccess;
  void* xq = nullptr;
  float4* xs = nullptr;
  if (gx.scratch) {
    if (!norm_quantizes_x(rows, n)) return cudaErrorInvalidValue;
    gq_x_views(gx.scratch, &xq, &xs);
  }
  const int form = gx.form();
  if (act == Act::BF16)
    return launch_rows<__nv_bfloat16, kAdd>(f32_residual, f32_x, residual, x, w, eps, out, rows, n, xq, form, xs, s,
                                             pdl);
  return launch_rows<__half, kAdd>(f32_residual, f32_x, residual, x, w, eps, out, rows, n, xq, form, xs, s, pdl);
}

}  // namespace

bool norm_quantizes_x(int rows, int n) {
  return rows <= kGqGemvMaxTokens && n % 32 == 0 && n <= kThreads * kMaxPerThread;
}

cudaError_t rms_norm(Act act, bool x_f32, const void* x, const float* w, float eps, void* out, int rows, int n,
                     cudaStream_t s, GqX xq, bool pdl) {
  return launch<false>(act, x_f32, false, nullptr, x, w, eps, out, rows, n, xq, s, pdl);
}

cudaError_t add_rms_norm(Act act, bool residual_f32, bool x_f32, void* residual, const void* x, const float* w,
                         float eps, void* out, int rows, int n, cudaStream_t s, GqX xq, bool pdl) {
  return launch<true>(act, residual_f32, x_f32, residual, x, w, eps, out, rows, n, xq, s, pdl);
}

}  // namespace lite_llama::cuda
