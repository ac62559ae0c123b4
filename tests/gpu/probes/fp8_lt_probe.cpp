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
  // Numeric check of OUTER_VEC: codes all 1.0, w_scale[n] = n + 1, x_scale[t] = 1000 (t + 1);
  // the right answer at (t, n) is K (n + 1) 1000 (t + 1).
  {
    const int N = 64, T = 32, K = 64, ldw = K + 16;
    std::vector<uint8_t> w(size_t(N) * ldw, 0x38), x(size_t(T) * K, 0x38);
    std::vector<float> wsc(N), xs(T);
    for (int n = 0; n < N; ++n) wsc[n] = float(n + 1);
    for (int t = 0; t < T; ++t) xs[t] = 1000.f * float(t + 1);
    void *dw, *dx, *dout;
    cudaMalloc(&dw, w.size());
    cudaMalloc(&dx, x.size());
    cudaMalloc(&dout, size_t(N) * T * 4);
    cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dx, x.data(), x.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(sa, wsc.data(), N * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(sb, xs.data(), T * 4, cudaMemcpyHostToDevice);
    for (cudaDataType_t dt : {CUDA_R_32F, CUDA_R_16BF}) {
      cublasLtMatmulDesc_t op;
      cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
      int32_t m = 3;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &m, sizeof(m));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &m, sizeof(m));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
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
      cublasLtMatmulAlgoGetHeuristic(h, op, a, b, c, c, pref, 1, &res, &found);
      const float alpha = 1.f, beta = 0.f;
      cudaMemset(dout, 0, size_t(N) * T * 4);
      cublasStatus_t st = cublasLtMatmul(h, op, &alpha, dw, a, dx, b, &beta, dout, c, dout, c, &res.algo, ws, wsb, 0);
      cudaDeviceSynchronize();
      std::vector<float> o(size_t(N) * T);
      if (dt == CUDA_R_32F) {
        cudaMemcpy(o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost);
      } else {
        std::vector<__nv_bfloat16> ob(o.size());
        cudaMemcpy(ob.data(), dout, ob.size() * 2, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < o.size(); ++i) o[i] = __bfloat162float(ob[i]);
      }
      printf("numeric %s found %d status %d err %s\n", dt == CUDA_R_32F ? "f32" : "bf16", found, int(st),
             cudaGetErrorString(cudaGetLastError()));
      for (int t : {0, 1, 5}) for (int n : {0, 1, 7, 40})
        printf("  t %d n %d: out / (K (n+1) 1000 (t+1)) = %g   out / K = %g\n", t, n,
               o[size_t(t) * N + n] / (K * (n + 1) * 1000.f * (t + 1)), o[size_t(t) * N + n] / K);
    }
  }
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
