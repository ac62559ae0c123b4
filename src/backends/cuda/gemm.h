// cuBLASLt projection: out[T, N] = x[T, K] @ W[N, K]^T (+ bias), 16-bit inputs, fp32 accumulation,
// 16-bit or fp32 output. Plans (descriptors + heuristic algorithm) are cached per shape so a
// step only sets pointers; safe inside CUDA graph capture (fixed workspace, no allocation). The
// heuristic is asked once per token-count bucket (bucket_tokens): a prefill chunk of a new length
// reuses its bucket's algorithm (checked with cublasLtMatmulAlgoCheck) instead of a new query and
// a new kernel's first load, which took ~5 ms of a cached chat turn's 47-token step on an H100.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <tuple>
#include <vector>

#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {

// What Gemm::tune measured for one token-count bucket: cuBLASLt's candidates, the one kept (0 = the
// heuristic's first) and the microseconds of a pass over the weights with the first and the kept.
struct GemmTuneResult {
  int candidates = 0, chosen = 0;
  double first_us = 0, chosen_us = 0;
};

class Gemm {
 public:
  explicit Gemm(size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // ldo: the output's row stride in elements (N when 0); a column block of a wider output.
  void run(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32, int T,
           int N, int K, cudaStream_t s, int ldo = 0);
  // FP8 W8A8: e4m3 x[T, K] (row scales x_scale[T]) times e4m3 W[N, K] (rows ldw bytes apart, row
  // scales w_scale[N]): out[t, n] = x_scale[t] w_scale[n] sum_k x[t, k] w[n, k] (+ bias), the
  // scales applied by cuBLASLt as outer vectors. False (nothing launched) where cuBLASLt has no
  // algorithm for it (before sm_89, or an older cuBLAS).
  bool run_fp8(Act act, const void* xq, const float* x_scale, const void* w, int ldw, const float* w_scale,
               const void* bias, void* out, bool out_f32, int T, int N, int K, cudaStream_t s, int ldo = 0);

  // At load, outside stream capture: times the heuristic's first kTuneCandidates algorithms for
  // out[T, N] = x W^T (+ bias) over `weights` (matrices of one shape, rotated so that a pass reads
  // more than the L2 holds) and keeps for T's bucket the fastest where it beats the first by
  // kTuneMinGain; a later run() of that bucket uses it. Scratch inputs and outputs; ldo = N. A
  // bucket already tuned or planned is left as it is.
  GemmTuneResult tune(Act act, bool out_f32, const void* bias, int T, int N, int K,
                      const std::vector<const void*>& weights, cudaStream_t s);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // (act, out_f32, bias, T, N, K, ldo, ldw of fp8 weights or 0 for 16-bit)
  using Key = std::tuple<int, bool, bool, int, int, int, int, int>;
  // nullptr where cuBLASLt offers no algorithm (remembered, so it is asked once per shape)
  Plan* plan(const Key& key);
  // The descriptors of `key`'s product (the plan without its algorithm); destroy() frees them.
  Plan describe(const Key& key);
  static void destroy(Plan& p);
  // The heuristic's first `n` algorithms for the product `p` describes (fewer or none
  // where it has no more).
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(const Plan& p, int n);
  // The heuristic's algorithm for `key` with its token count as given, asked with `p` (nullptr:
  // descriptors made for the question, where no answer is cached); nullptr where none.
  const cublasLtMatmulAlgo_t* heuristic(const Key& key, const Plan* p);
  // The product with a plan: bias pointer (when there is one), then cublasLtMatmul.
  void matmul(Plan& p, const void* x, const void* w, const void* bias, void* out, cudaStream_t s);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_;
  std::map<Key, Plan> plans_;
  std::map<Key, bool> unsupported_;
  std::map<Key, cublasLtMatmulAlgo_t> algos_;  // by bucketed key; absent algorithms not stored
  std::map<Key, bool> no_algo_;
};

}  // namespace lite_llama::cuda
