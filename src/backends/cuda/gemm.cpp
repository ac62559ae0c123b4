#include "backends/cuda/gemm.h"

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {

Gemm::Gemm(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  LL_CUBLAS(cublasLtCreate(&handle_));
  LL_CUDA(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  for (auto& [k, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

// Row-major out[T, N] is column-major out^T [N, T] = W (col-major [K, N], transposed) x x^T
// (col-major [K, T]): so A = W with op T, B = x with op N, m = N, n = T, k = K.
Gemm::Plan& Gemm::plan(Act act, bool out_f32, bool bias, int T, int N, int K, int ldo) {
  const Key key{int(act), out_f32, bias, T, N, K, ldo};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  const cudaDataType_t in = act == Act::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType_t outt = out_f32 ? CUDA_R_32F : in;
  LL_CUBLAS(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias) {
    const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    // Bias is stored in the activation type.
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &in, sizeof(in)));
  }
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, in, K, N, K));
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, in, K, T, K));
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, outt, N, T, ldo));
  cublasLtMatmulPreference_t pref;
  LL_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  LL_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  LL_CUBLAS(cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  LL_CHECK(found > 0, "cuBLASLt found no algorithm for a [{}, {}] x [{}, {}]^T product", T, K, N, K);
  p.algo = res.algo;
  return plans_.emplace(key, p).first->second;
}

void Gemm::run(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32, int T,
               int N, int K, cudaStream_t s, int ldo) {
  if (T == 0) return;
  Plan& p = plan(act, out_f32, bias != nullptr, T, N, K, ldo ? ldo : N);
  if (bias)
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.f, beta = 0.f;
  LL_CUBLAS(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo,
                           workspace_, workspace_bytes_, s));
}

}  // namespace lite_llama::cuda
