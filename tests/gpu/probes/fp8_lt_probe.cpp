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

// One FP8 matmul description (TN, e4m3 in, fp32 compute) and the heuristic's answer for it.
// qa / qb: the scale pointers set for the query (nullptr: none set).
struct Lt {
  cublasLtMatmulDesc_t op{};
  cublasLtMatrixLayout_t a{}, b{}, c{};
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  cublasStatus_t status{};
  Lt(cublasLtHandle_t h, int mode, cudaDataType_t dt, bool bias, int ldw, bool fast, int T, int N, int K,
     const void* qa, const void* qb, size_t ws_bytes) {
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
    if (qa) set_scales(qa, qb);
    if (fast) {
      int8_t f = 1;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof(f));
    }
    cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, K, N, ldw);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, K, T, K);
    cublasLtMatrixLayoutCreate(&c, dt, N, T, N);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes));
    status = cublasLtMatmulAlgoGetHeuristic(h, op, a, b, c, c, pref, 1, &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
  }
  void set_scales(const void* sa, const void* sb) {
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
  }
  ~Lt() {
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
  }
};

static int try_cfg(cublasLtHandle_t h, int mode, cudaDataType_t dt, bool bias, bool set_ptrs, int ldw, bool fast,
                   int T, int N, int K, float* sa, float* sb) {
  Lt lt(h, mode, dt, bias, ldw, fast, T, N, K, set_ptrs ? sa : nullptr, sb, 32u << 20);
  printf("mode %d out %s bias %d ptrs %d ldw %d fast %d T %d N %d K %d: status %d found %d\n", mode,
         dt == CUDA_R_16BF ? "bf16" : dt == CUDA_R_16F ? "f16" : "f32", bias, set_ptrs, ldw, fast, T, N, K,
         int(lt.status), lt.found);
  return lt.found;
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
  // Numeric check of OUTER_VEC on random codes: which scale goes with which operand. The product
  // is compared with (a) w_scale[n] x_scale[t] sum and (b) the swapped w_scale[t] x_scale[n]
  // (only where both indices are in range).
  for (int shape = 0; shape < 2; ++shape) {
    const int T = shape ? 64 : 16, N = 1000, K = shape ? 2048 : 576, ldw = K + 16;
    std::vector<uint8_t> w(size_t(N) * ldw), x(size_t(T) * K);
    unsigned r = 12345;
    auto rnd = [&] { r = r * 1664525u + 1013904223u; return r >> 8; };
    auto code = [&] { uint8_t c = uint8_t(rnd() & 0x7f); if (c == 0x7f) c = 0x7e; return uint8_t(c | ((rnd() & 1) << 7)); };
    for (auto& v : w) v = code();
    for (auto& v : x) v = code();
    std::vector<float> wsc(N), xs(T);
    for (int n = 0; n < N; ++n) wsc[n] = 1e-4f * float(1 + n % 7);
    for (int t = 0; t < T; ++t) xs[t] = 1e-2f * float(1 + t % 5);
    void *dw, *dx, *dout;
    cudaMalloc(&dw, w.size());
    cudaMalloc(&dx, x.size());
    cudaMalloc(&dout, size_t(N) * T * 4);
    cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dx, x.data(), x.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(sa, wsc.data(), N * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(sb, xs.data(), T * 4, cudaMemcpyHostToDevice);
    auto e4 = [](uint8_t v) {
      const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
      const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
      return s ? -mag : mag;
    };
    std::vector<double> sum(size_t(T) * N);
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += e4(x[size_t(t) * K + k]) * e4(w[size_t(n) * ldw + k]);
        sum[size_t(t) * N + n] = acc;
      }
    for (int variant = 0; variant < 2; ++variant) {  // 0: scale pointers set before the heuristic; 1: after
      const size_t wsb = 16u << 20;
      Lt lt(h, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, CUDA_R_32F, false, ldw, false, T, N, K,
            variant ? ws : static_cast<void*>(sa), variant ? ws : static_cast<void*>(sb), wsb);
      lt.set_scales(sa, sb);
      const float alpha = 1.f, beta = 0.f;
      cudaMemset(dout, 0, size_t(N) * T * 4);
      cublasStatus_t st = cublasLtMatmul(h, lt.op, &alpha, dw, lt.a, dx, lt.b, &beta, dout, lt.c, dout, lt.c,
                                         &lt.res.algo, (char*)ws + (16u << 20), wsb, 0);
      cudaDeviceSynchronize();
      std::vector<float> o(size_t(N) * T);
      cudaMemcpy(o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost);
      double ea = 0, eb = 0, na = 0, nb = 0, eu = 0;
      for (int t = 0; t < T; ++t)
        for (int n = 0; n < N; ++n) {
          const double got = o[size_t(t) * N + n], s = sum[size_t(t) * N + n];
          const double wa = s * wsc[n] * xs[t];
          ea += (got - wa) * (got - wa), na += wa * wa;
          eu += (got - s) * (got - s);
          if (n < T && t < N) {
            const double wb = s * wsc[t] * xs[n];
            eb += (got - wb) * (got - wb), nb += wb * wb;
          }
        }
      printf("T %d K %d variant %d found %d status %d: rel err (w[n] x[t]) %g, swapped %g, unscaled %g\n", T, K,
             variant, lt.found, int(st), std::sqrt(ea / na), nb > 0 ? std::sqrt(eb / nb) : -1.0, std::sqrt(eu / na));
    }
  }
  for (int mode : {0, 3})
    for (cudaDataType_t dt : {CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F})
      for (bool ptrs : {false, true}) try_cfg(h, mode, dt, false, ptrs, 2048 + 16, false, 64, 1024, 2048, sa, sb);
  for (int ldw : {2048, 2064}) try_cfg(h, 3, CUDA_R_16BF, false, true, ldw, false, 64, 1024, 2048, sa, sb);
  try_cfg(h, 3, CUDA_R_16BF, true, true, 2064, false, 64, 1024, 2048, sa, sb);
  try_cfg(h, 3, CUDA_R_16BF, false, true, 2064, true, 64, 1024, 2048, sa, sb);
  for (int T : {16, 17, 33, 300}) try_cfg(h, 3, CUDA_R_16BF, false, true, 2064, false, T, 1000, 2048, sa, sb);
  try_cfg(h, 3, CUDA_R_16BF, false, true, 592, false, 16, 1000, 576, sa, sb);
  try_cfg(h, 0, CUDA_R_16BF, false, true, 592, false, 16, 1000, 576, sa, sb);
  try_cfg(h, 0, CUDA_R_16BF, true, true, 592, false, 16, 1000, 576, sa, sb);
  return 0;
}
