// Experiment: cuBLASLt's top-1 heuristic algorithm against the fastest of its top-N candidates for
// decode-sized products (T = 2..16 tokens), the shapes of Llama-3.2-1B and Qwen3-4B, bf16 in/out,
// fp32 compute, the "TN" layout of src/backends/cuda/gemm.cpp, 32 MiB workspace. Each time is a
// CUDA graph of back-to-back calls over rotating weight copies (more bytes than the L2 holds).
//   nvcc -O2 -std=c++17 -arch=sm_90a gemm_algo.cu -lcublasLt -o gemm-algo && ./gemm-algo
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));       \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)
#define CB(x)                                                                 \
  do {                                                                        \
    cublasStatus_t s_ = (x);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                        \
      std::fprintf(stderr, "%s:%d cublas %d\n", __FILE__, __LINE__, int(s_)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = __float2bfloat16((float(h & 0xffff) / 65536.f - 0.5f) * 0.1f);
  }
}

template <class F>
static double graph_us(cudaStream_t s, int calls, int reps, const F& fn) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < calls; ++i) fn(i);
  CK(cudaStreamEndCapture(s, &g));
  if (cudaGraphInstantiate(&e, g, 0) != cudaSuccess) return -1;
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(e, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  return ms[reps / 2] * 1e3 / calls;
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasLtHandle_t h;
  CB(cublasLtCreate(&h));
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  // copy bandwidth (read + write) of 1 GiB
  {
    size_t n = size_t(1) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 9; ++r) {
      CK(cudaEventRecord(e0, s));
      CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    const double us = t[4] * 1e3;
    std::printf("copy %.1f GB/s\n", 2.0 * n / us / 1e3);
    cudaFree(a), cudaFree(b);
  }
  struct Shape { const char* name; int N, K; };
  const Shape shapes[] = {{"llama1b.qkv", 3072, 2048},     {"llama1b.o", 2048, 2048},    {"llama1b.gate_up", 16384, 2048},
                          {"llama1b.down", 2048, 8192},    {"llama1b.lm_head", 128256, 2048},
                          {"llama3b.qkv", 5120, 3072},     {"llama3b.o", 3072, 3072},    {"llama3b.gate_up", 16384, 3072},
                          {"llama3b.down", 3072, 8192},    {"qwen25.qkv", 2560, 2048},   {"qwen25.gate_up", 22016, 2048},
                          {"qwen25.down", 2048, 11008},    {"qwen25.lm_head", 151936, 2048},
                          {"qwen4b.qkv", 6144, 2560},      {"qwen4b.o", 2560, 4096},
                          {"qwen4b.gate_up", 19456, 2560}, {"qwen4b.down", 2560, 9728}, {"qwen4b.lm_head", 151936, 2560}};
  const int Ts[] = {2, 4, 8, 16, 32, 64, 128, 256};
  const int kCand = 24;
  for (const Shape& sh : shapes) {
    const size_t wbytes = size_t(sh.N) * sh.K * 2;
    const int copies = int(std::max<size_t>(2, (size_t(200) << 20) / wbytes + 1));
    const int calls = std::max(2 * copies, 8);  // >= 200 MB of weights
    std::vector<__nv_bfloat16*> w(copies);
    for (int c = 0; c < copies; ++c) {
      CK(cudaMalloc(&w[c], wbytes));
      fill<<<1024, 256, 0, s>>>(w[c], size_t(sh.N) * sh.K, 17u + c);
    }
    __nv_bfloat16 *x, *o;
    CK(cudaMalloc(&x, size_t(256) * sh.K * 2));
    CK(cudaMalloc(&o, size_t(256) * sh.N * 2));
    fill<<<64, 256, 0, s>>>(x, size_t(256) * sh.K, 5u);
    for (int T : Ts) {
      cublasLtMatmulDesc_t op;
      CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      cublasLtMatrixLayout_t la, lb, lc;
      CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, sh.K, sh.N, sh.K));
      CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, sh.K, T, sh.K));
      CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, sh.N, T, sh.N));
      cublasLtMatmulPreference_t pref;
      CB(cublasLtMatmulPreferenceCreate(&pref));
      CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
      std::vector<cublasLtMatmulHeuristicResult_t> res(kCand);
      int found = 0;
      CB(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, kCand, res.data(), &found));
      const float alpha = 1.f, beta = 0.f;
      std::vector<double> us(found, -1);
      for (int i = 0; i < found; ++i) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        us[i] = graph_us(s, calls, 7, [&](int c) {
          cublasLtMatmul(h, op, &alpha, w[c % copies], la, x, lb, &beta, o, lc, o, lc, &res[i].algo, ws, ws_bytes, s);
        });
      }
      int best = 0;
      for (int i = 0; i < found; ++i)
        if (us[i] > 0 && (us[best] <= 0 || us[i] < us[best])) best = i;
      int splitk = 0, tile = 0, algo_id = 0;
      size_t sz;
      cublasLtMatmulAlgoConfigGetAttribute(&res[best].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &sz);
      cublasLtMatmulAlgoConfigGetAttribute(&res[best].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &sz);
      cublasLtMatmulAlgoConfigGetAttribute(&res[best].algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof(algo_id), &sz);
      int splitk0 = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&res[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk0, sizeof(splitk0), &sz);
      std::printf("%-16s T %2d: top1 %8.2f us (%5.1f GB/s, splitk %d)  best #%2d of %2d %8.2f us (%5.1f GB/s, splitk %d, algo %d tile %d)  %+.1f%%\n",
                  sh.name, T, us[0], wbytes / us[0] / 1e3, splitk0, best, found, us[best], wbytes / us[best] / 1e3, splitk,
                  algo_id, tile, (us[best] / us[0] - 1) * 100);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
    }
    for (auto* p : w) cudaFree(p);
    cudaFree(x), cudaFree(o);
  }
  return 0;
}
