// cuBLASLt projection: out[T, N] = x[T, K] @ W[N, K]^T (+ bias), 16-bit inputs, fp32 accumulation,
// 16-bit or fp32 output. Plans (descriptors + heuristic algorithm) are cached per shape so a
// step only sets pointers; safe inside CUDA graph capture (fixed workspace, no allocation).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>

#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {

class Gemm {
 public:
  explicit Gemm(size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // ldo: the output's row stride in elements (N when 0); a column block of a wider output.
  void run(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32, int T,
           int N, int K, cudaStream_t s, int ldo = 0);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int, bool, bool, int, int, int, int>;
  Plan& plan(Act act, bool out_f32, bool bias, int T, int N, int K, int ldo);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_;
  std::map<Key, Plan> plans_;
};

}  // namespace lite_llama::cuda
