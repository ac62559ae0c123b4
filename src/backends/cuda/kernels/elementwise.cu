// Small memory-bound kernels: SwiGLU, embedding gather, row gather, slot table writes,
// conversions and dummy-weight fill.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"
#include "core/hash_random.h"

namespace lite_llama::cuda {
namespace {

// out[t, i] = silu(g) * u with gate_up[t] = [g(F) | u(F)]; 8 elements per thread when F % 8 == 0.
// The token is blockIdx.x (up to 2^31 - 1; y and z stop at 65,535), the column block blockIdx.y.
template <typename T>
__global__ void swiglu_kernel(const T* __restrict__ gu, T* __restrict__ out, int T_, int F, void* __restrict__ xq,
                              int form, float4* __restrict__ xs) {
  pdl_trigger();  // the down projection's quantised GEMV may start fetching its weights
  const int t = blockIdx.x;
  const T* g = gu + size_t(t) * 2 * F;
  const T* u = g + F;
  T* o = out + size_t(t) * F;
  if (F % 8 == 0) {
    for (int i = (blockIdx.y * blockDim.x + threadIdx.x) * 8; i < F; i += gridDim.y * blockDim.x * 8) {
      float gf[8], uf[8], of[8];
      unpack8<T>(*reinterpret_cast<const uint4*>(g + i), gf);
      unpack8<T>(*reinterpret_cast<const uint4*>(u + i), uf);
#pragma unroll
      for (int j = 0; j < 8; ++j) of[j] = gf[j] / (1.0f + __expf(-gf[j])) * uf[j];
      const uint4 packed = pack8<T>(of);
      *reinterpret_cast<uint4*>(o + i) = packed;
      if (xq) {  // the integer form for the down projection's quantised GEMV (F % 32 == 0 here)
        unpack8<T>(packed, of);
        quantize8_to_blocks(of, size_t(t) * F + i, xq, form, xs);
      }
    }
  } else {
    for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < F; i += gridDim.y * blockDim.x) {
      float gv = to_f(g[i]);
      o[i] = from_f<T>(gv / (1.0f + __expf(-gv)) * to_f(u[i]));
    }
  }
}

// out[i, :] = float(table[ids[i], :]): the embedding into the fp32 residual stream.
template <typename T>
__global__ void embed_f32_kernel(const T* __restrict__ table, const int32_t* __restrict__ ids,
                                 float* __restrict__ out, int n) {
  const T* src = table + size_t(ids[blockIdx.x]) * n;
  float* dst = out + size_t(blockIdx.x) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = to_f(src[i]);
}

__global__ void copy_rows_kernel(const uint8_t* __restrict__ src, const int32_t* __restrict__ rows,
                                 uint8_t* __restrict__ dst, size_t row_bytes) {
  const size_t r = size_t(rows[blockIdx.x]);
  const uint8_t* s = src + r * row_bytes;
  uint8_t* d = dst + size_t(blockIdx.x) * row_bytes;
  if (row_bytes % 16 == 0) {
    for (size_t i = threadIdx.x * 16; i < row_bytes; i += blockDim.x * 16)
      *reinterpret_cast<uint4*>(d + i) = *reinterpret_cast<const uint4*>(s + i);
  } else {
    for (size_t i = threadIdx.x; i < row_bytes; i += blockDim.x) d[i] = s[i];
  }
}

__global__ void slot_table_kernel(int32_t* table, int stride, const int32_t* t_req, const int32_t* t_pos,
                                  const int32_t* t_slots, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) table[size_t(t_req[t]) * stride + t_pos[t]] = t_slots[t];
}

template <typename T>
__global__ void add_bias_kernel(float* out, const T* bias, int T_, int N) {
  const size_t n = size_t(T_) * N;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] += to_f(bias[i % N]);
}

template <typename T>
__global__ void convert_kernel(const float* src, T* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = from_f<T>(src[i]);
}

template <typename T>
__global__ void random_kernel(T* dst, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = from_f<T>(hash_uniform(seed, i, scale));
}

}  // namespace

bool swiglu_quantizes_x(int T, int F) { return T <= kGqGemvMaxTokens && F % 32 == 0 && F <= kGqMaxK; }

cudaError_t swiglu(Act act, const void* gate_up, void* out, int T, int F, cudaStream_t s, GqX gx) {
  if (T == 0) return cudaSuccess;
  void* xq = nullptr;
  float4* xs = nullptr;
  if (gx.scratch) {
    if (!swiglu_quantizes_x(T, F)) return cudaErrorInvalidValue;
    gq_x_views(gx.scratch, &xq, &xs);
  }
  const int form = gx.form();
  const dim3 grid(T, std::min<unsigned>(ceil_div(F, 256 * 8), 64));
  if (act == Act::BF16)
    swiglu_kernel<<<grid, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(gate_up),
                                       static_cast<__nv_bfloat16*>(out), T, F, xq, form, xs);
  else
    swiglu_kernel<<<grid, 256, 0, s>>>(static_cast<const __half*>(gate_up), static_cast<__half*>(out), T, F,
                                       xq, form, xs);
  return cudaGetLastError();
}

cudaError_t gather_rows(const void* x, const int32_t* rows, void* out, int count, size_t row_bytes,
                        cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  copy_rows_kernel<<<count, 128, 0, s>>>(static_cast<const uint8_t*>(x), rows,
                                         static_cast<uint8_t*>(out), row_bytes);
  return cudaGetLastError();
}

cudaError_t embedding(Act table_type, const void* table, const int32_t* ids, void* out, int count, int n,
                      bool f32_out, cudaStream_t s) {
  if (!f32_out) return gather_rows(table, ids, out, count, size_t(n) * 2, s);
  if (count == 0) return cudaSuccess;
  if (table_type == Act::BF16)
    embed_f32_kernel<<<count, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(table), ids, static_cast<float*>(out), n);
  else
    embed_f32_kernel<<<count, 256, 0, s>>>(static_cast<const __half*>(table), ids, static_cast<float*>(out), n);
  return cudaGetLastError();
}

cudaError_t write_slot_table(int32_t* table, int stride, const int32_t* t_req, const int32_t* t_pos,
                             const int32_t* t_slots, int n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  slot_table_kernel<<<ceil_div(n, 256), 256, 0, s>>>(table, stride, t_req, t_pos, t_slots, n);
  return cudaGetLastError();
}

cudaError_t add_bias_f32(Act act, float* out, const void* bias, int T, int N, cudaStream_t s) {
  if (T == 0) return cudaSuccess;
  unsigned blocks = std::min<unsigned>(ceil_div(long(T) * N, 256), 4096);
  if (act == Act::BF16)
    add_bias_kernel<<<blocks, 256, 0, s>>>(out, static_cast<const __nv_bfloat16*>(bias), T, N);
  else
    add_bias_kernel<<<blocks, 256, 0, s>>>(out, static_cast<const __half*>(bias), T, N);
  return cudaGetLastError();
}

cudaError_t convert_f32(Act act, const float* src, void* dst, size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  unsigned blocks = std::min<unsigned>(ceil_div(long(n), 256), 4096);
  if (act == Act::BF16)
    convert_kernel<<<blocks, 256, 0, s>>>(src, static_cast<__nv_bfloat16*>(dst), n);
  else
    convert_kernel<<<blocks, 256, 0, s>>>(src, static_cast<__half*>(dst), n);
  return cudaGetLastError();
}

cudaError_t random_fill(Act act, void* dst, size_t n, uint64_t seed, float scale, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  unsigned blocks = std::min<unsigned>(ceil_div(long(n), 256), 8192);
  if (act == Act::BF16)
    random_kernel<<<blocks, 256, 0, s>>>(static_cast<__nv_bfloat16*>(dst), n, seed, scale);
  else
    random_kernel<<<blocks, 256, 0, s>>>(static_cast<__half*>(dst), n, seed, scale);
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
