// Constrained decoding on the GPU: grammar token masks and logit biases applied to the logits
// rows in place, before the sampler (or argmax) reads them.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row; a thread per column: clear bit -> -inf.
__global__ void __launch_bounds__(kThreads) mask_kernel(float* __restrict__ logits, int V, int cols,
                                                        const uint32_t* __restrict__ masks, int words) {
  float* row = logits + size_t(blockIdx.y) * V;
  const uint32_t* m = masks + size_t(blockIdx.y) * words;
  const int t = blockIdx.x * kThreads + threadIdx.x;
  if (t < cols && !((m[t >> 5] >> (t & 31)) & 1u)) row[t] = -INFINITY;
}

// Entries may name one (row, token) twice: add atomically.
__global__ void bias_kernel(float* __restrict__ logits, int V, const ops::LogitBias* __restrict__ bias, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(logits + size_t(bias[i].row) * V + bias[i].token, bias[i].bias);
}

}  // namespace

cudaError_t constrain_rows(float* logits, int rows, int V, const uint32_t* masks, int words,
                           const ops::LogitBias* bias, int n_bias, cudaStream_t s) {
  if (rows <= 0) return cudaSuccess;
  if (masks && words > 0) {
    const int cols = std::min(V, words * 32);
    mask_kernel<<<dim3((cols + kThreads - 1) / kThreads, rows), kThreads, 0, s>>>(logits, V, cols, masks, words);
  }
  if (bias && n_bias > 0) bias_kernel<<<(n_bias + kThreads - 1) / kThreads, kThreads, 0, s>>>(logits, V, bias, n_bias);
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
