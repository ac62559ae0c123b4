#include "backends/cuda/gemm.h"

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {
namespace {

// Token counts that share a heuristic query: exact up to 16 (decode batches, where the choice
// matters most), then multiples of 32 up to 1,024 and of 256 above, so the algorithm used was
// chosen for a count at most 32 (256) larger.
int bucket_tokens(int T) {
  if (T <= 16) return T;
  if (T <= 1024) return (T + 31) / 32 * 32;
  return (T + 255) / 256 * 256;
}

}  // namespace

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
// (col-major [K, T]): so A = W with op T, B = x with op N, m = N, n = T, k = K. This "TN" form is
// also the one cuBLASLt's FP8 kernels require.
Gemm::Plan* Gemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  if (unsupported_.count(key)) return nullptr;
  const auto [act_i, out_f32, bias, T, N, K, ldo, ldw] = key;
  const bool fp8 = ldw > 0;
  Plan p;
  const cudaDataType_t act = act_i == int(Act::BF16) ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : act;
  const cudaDataType_t outt = out_f32 ? CUDA_R_32F : act;
  LL_CUBLAS(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (bias) {
    const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    // Bias is stored in the activation type (the output type here).
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &act, sizeof(act)));
  }
  if (fp8) {
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
    // Some cuBLASLt versions only offer scaled algorithms once the scale pointers are set: any
    // device pointer will do for the query, each call sets the real ones.
    const void* any = workspace_;
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &any, sizeof(any)));
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &any, sizeof(any)));
  }
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, in, K, N, fp8 ? ldw : K));
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, in, K, T, K));
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, outt, N, T, ldo));
  auto drop = [&] {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  };
  Key bucket = key;
  std::get<3>(bucket) = bucket_tokens(T);
  const cublasLtMatmulAlgo_t* algo = heuristic(bucket, p.op, p.a);
  cublasLtMatmulHeuristicResult_t check{};
  if (algo && std::get<3>(bucket) != T &&
      cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, algo, &check) != CUBLAS_STATUS_SUCCESS)
    algo = heuristic(key, p.op, p.a);  // the bucket's algorithm does not fit this exact shape
  if (!algo) {
    drop();
    unsupported_[key] = true;
    return nullptr;
  }
  p.algo = *algo;
  return &plans_.emplace(key, p).first->second;
}

const cublasLtMatmulAlgo_t* Gemm::heuristic(const Key& key, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a) {
  if (auto it = algos_.find(key); it != algos_.end()) return &it->second;
  if (no_algo_.count(key)) return nullptr;
  const auto [act_i, out_f32, bias, T, N, K, ldo, ldw] = key;
  const cudaDataType_t act = act_i == int(Act::BF16) ? CUDA_R_16BF : CUDA_R_16F;
  cublasLtMatrixLayout_t b = nullptr, c = nullptr;
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&b, ldw > 0 ? CUDA_R_8F_E4M3 : act, K, T, K));
  LL_CUBLAS(cublasLtMatrixLayoutCreate(&c, out_f32 ? CUDA_R_32F : act, N, T, ldo));
  cublasLtMatmulPreference_t pref;
  LL_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  LL_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, op, a, b, c, c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    no_algo_[key] = true;
    return nullptr;
  }
  return &algos_.emplace(key, res.algo).first->second;
}

void Gemm::run(Act act, const void* x, const void* w, const void* bias, void* out, bool out_f32, int T,
               int N, int K, cudaStream_t s, int ldo) {
  if (T == 0) return;
  Plan* p = plan(Key{int(act), out_f32, bias != nullptr, T, N, K, ldo ? ldo : N, 0});
  LL_CHECK(p, "cuBLASLt found no algorithm for a [{}, {}] x [{}, {}]^T product", T, K, N, K);
  matmul(*p, x, w, bias, out, s);
}

bool Gemm::run_fp8(Act act, const void* xq, const float* x_scale, const void* w, int ldw, const float* w_scale,
                   const void* bias, void* out, bool out_f32, int T, int N, int K, cudaStream_t s, int ldo) {
  if (T == 0) return true;
  Plan* p = plan(Key{int(act), out_f32, bias != nullptr, T, N, K, ldo ? ldo : N, ldw});
  if (!p) return false;
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
  LL_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)));
  matmul(*p, xq, w, bias, out, s);
  return true;
}

void Gemm::matmul(Plan& p, const void* x, const void* w, const void* bias, void* out, cudaStream_t s) {
  if (bias)
    LL_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.f, beta = 0.f;
  LL_CUBLAS(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo,
                           workspace_, workspace_bytes_, s));
}

}  // namespace lite_llama::cuda
