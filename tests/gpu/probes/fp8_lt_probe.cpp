// Which FP8 cuBLASLt configurations have an algorithm on this GPU / cuBLAS (heuristic query
// only), and does a bf16-output OUTER_VEC product compute the right thing. Build:
//   nvcc -O2 -std=c++17 fp8_lt_probe.cpp -lcublasLt -o /tmp/fp8_probe
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

static int try_cfg(cublasLtHandle_t h, void* ws, int mode, cudaDataType_t dt, bool bias, bool set_ptrs, int ldw,
                   bool fast, int T, int N, int K, float* sa, float* sb) {
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  if (bias) {
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep));
    cudaDataType_t bt = CUDA_R_16BF;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
  }
  int32_t m = mode;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &m, sizeof(m));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &m, sizeof(m));
  if (set_ptrs) {
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
  }
  if (fast) {
    int8_t f = 1;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof(f));
  }
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, K, N, ldw);
  cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, K, T, K);
  cublasLtMatrixLayoutCreate(&c, dt, N, T, N);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  size_t wsb = 32u << 20;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, a, b, c, c, pref, 1, &res, &found);
  printf("mode %d out %s bias %d ptrs %d ldw %d fast %d T %d N %d K %d: status %d found %d\n", mode,
         dt == CUDA_R_16BF ? "bf16" : dt == CUDA_R_16F ? "f16" : "f32", bias, set_ptrs, ldw, fast, T, N, K, int(st),
         found);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(c);
  cublasLtMatmulDescDestroy(op);
  return found;
}

int main() {
  printf("cublasLt version %zu, cudart %zu\n", cublasLtGetVersion(), cublasLtGetCudartVersion());
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  void* ws;
  cudaMalloc(&ws, 32u << 20);
  float *sa, *sb;
  cudaMalloc(&sa, 1 << 20);
  cudaMalloc(&sb, 1 << 20);
  for (int mode : {0, 3})
    for (cudaDataType_t dt : {CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F})
      for (bool ptrs : {false, true}) try_cfg(h, ws, mode, dt, false, ptrs, 2048 + 16, false, 64, 1024, 2048, sa, sb);
  for (int ldw : {2048, 2064}) try_cfg(h, ws, 3, CUDA_R_16BF, false, true, ldw, false, 64, 1024, 2048, sa, sb);
  try_cfg(h, ws, 3, CUDA_R_16BF, true, true, 2064, false, 64, 1024, 2048, sa, sb);
  try_cfg(h, ws, 3, CUDA_R_16BF, false, true, 2064, true, 64, 1024, 2048, sa, sb);
  for (int T : {16, 17, 33, 300}) try_cfg(h, ws, 3, CUDA_R_16BF, false, true, 2064, false, T, 1000, 2048, sa, sb);
  try_cfg(h, ws, 3, CUDA_R_16BF, false, true, 592, false, 16, 1000, 576, sa, sb);
  try_cfg(h, ws, 0, CUDA_R_16BF, false, true, 592, false, 16, 1000, 576, sa, sb);
  try_cfg(h, ws, 0, CUDA_R_16BF, true, true, 592, false, 16, 1000, 576, sa, sb);
  return 0;
}
