// 16-bit decode projections at 1-16 tokens: the one-token GEMV (T = 1), cuBLASLt and the
// tensor-core GEMV gemv_tc, on the linears of Llama-3.2-1B and Qwen3-4B. Each case is a CUDA graph
// of back-to-back calls (as a decode step runs them; GEMVs with PDL on sm_90) rotating over copies
// of the matrix 4x the L2, so every call reads its weights from HBM. One line per case: us per
// call, GB/s of weight bytes and its ratio to the device copy measured first, gemv_tc / cuBLASLt,
// and gemv_tc's largest difference from cuBLASLt (F32 outputs) over the largest |output|.
//   gemv-tc-bench [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/launchers.h"
#include "bench_util.h"

namespace {

using namespace lite_llama::cuda;

struct Shape {
  const char *model, *name;
  int N, K;
};

}  // namespace

int main(int argc, char** argv) {
  const char* json = argc == 3 && std::strcmp(argv[1], "--json") == 0 ? argv[2] : nullptr;
  if (argc != 1 && !json) {
    std::fprintf(stderr, "usage: gemv-tc-bench [--json FILE]\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const bool pdl = prop.major >= 9;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double copy_gbs = copy_bandwidth_gbs(size_t(1) << 30, s);
  std::printf("device %s, %d SMs, L2 %d MB, pdl %d, copy d2d %.1f GB/s\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, int(pdl), copy_gbs);
  std::string out = "{\"device\": \"" + std::string(prop.name) + "\", \"copy_GBps\": " + std::to_string(copy_gbs) +
                    ", \"cases\": [";
  const Shape shapes[] = {{"llama-3.2-1b", "qkv", 3072, 2048},     {"llama-3.2-1b", "o", 2048, 2048},
                          {"llama-3.2-1b", "gate_up", 16384, 2048}, {"llama-3.2-1b", "down", 2048, 8192},
                          {"llama-3.2-1b", "lm_head", 128256, 2048}, {"qwen3-4b", "qkv", 6144, 2560},
                          {"qwen3-4b", "o", 2560, 4096},            {"qwen3-4b", "gate_up", 19456, 2560},
                          {"qwen3-4b", "down", 2560, 9728}};
  const size_t rotate = size_t(prop.l2CacheSize) * 4;
  Gemm gemm(size_t(32) << 20);
  bool first = true;
  std::printf("%-13s %-8s %6s %5s %2s | %8s %8s | %7s %7s | %5s %5s | %6s %9s\n", "model", "linear", "N", "K", "T",
              "cublas", "gemv_tc", "cuGB/s", "tcGB/s", "cu/cp", "tc/cp", "tc/cu", "reldiff");
  for (const Shape& sh : shapes) {
    const int N = sh.N, K = sh.K;
    const size_t wbytes = size_t(N) * K * 2;
    const int copies = int(std::max<size_t>(2, (rotate + wbytes - 1) / wbytes));
    std::vector<void*> ws(size_t(copies), nullptr);
    ws[0] = dev_alloc(wbytes);
    CK(random_fill(Act::BF16, ws[0], size_t(N) * K, 7, 0.02f, s));
    for (int c = 1; c < copies; ++c) {
      ws[size_t(c)] = dev_alloc(wbytes);
      CK(cudaMemcpyAsync(ws[size_t(c)], ws[0], wbytes, cudaMemcpyDeviceToDevice, s));
    }
    void* x = dev_alloc(size_t(16) * K * 2);
    CK(random_fill(Act::BF16, x, size_t(16) * K, 11, 1.f, s));
    void* o = dev_alloc(size_t(16) * N * 4);
    void* o2 = dev_alloc(size_t(16) * N * 4);
    CK(cudaStreamSynchronize(s));
    const int calls = std::max(copies, 64 / copies * copies);
    auto w_of = [&](int i) { return ws[size_t(i % copies)]; };
    for (int T : {1, 2, 3, 4, 8, 16}) {
      // T = 1: the engine's one-token GEMV in the cuBLASLt column's place.
      const double cu = graph_us(s, [&](int i) {
        if (T == 1) CK(gemv(Act::BF16, x, w_of(i), nullptr, o, false, 1, N, K, N, s, pdl));
        else gemm.run(Act::BF16, x, w_of(i), nullptr, o, false, T, N, K, s);
      }, calls, 7);
      const double tc = graph_us(s, [&](int i) {
        CK(gemv_tc(Act::BF16, x, w_of(i), nullptr, o, false, T, N, K, N, s, pdl));
      }, calls, 7);
      gemm.run(Act::BF16, x, ws[0], nullptr, o, true, T, N, K, s);
      CK(gemv_tc(Act::BF16, x, ws[0], nullptr, o2, true, T, N, K, N, s, false));
      std::vector<float> a(size_t(T) * N), b(a.size());
      CK(cudaMemcpyAsync(a.data(), o, a.size() * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaMemcpyAsync(b.data(), o2, b.size() * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      double amax = 0, dmax = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        amax = std::max(amax, double(std::fabs(a[i])));
        dmax = std::max(dmax, double(std::fabs(a[i] - b[i])));
      }
      const double rel = amax > 0 ? dmax / amax : dmax, cu_gbs = double(wbytes) / cu / 1e3,
                   tc_gbs = double(wbytes) / tc / 1e3;
      std::printf("%-13s %-8s %6d %5d %2d | %8.2f %8.2f | %7.0f %7.0f | %5.2f %5.2f | %6.3f %9.2e\n", sh.model,
                  sh.name, N, K, T, cu, tc, cu_gbs, tc_gbs, cu_gbs / copy_gbs, tc_gbs / copy_gbs, tc / cu, rel);
      std::fflush(stdout);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"model\": \"%s\", \"linear\": \"%s\", \"N\": %d, \"K\": %d, \"T\": %d, \"%s_us\": %.3f, "
                    "\"gemv_tc_us\": %.3f, \"gemv_tc_max_rel_diff\": %.3e}",
                    first ? "" : ", ", sh.model, sh.name, N, K, T, T == 1 ? "gemv1" : "cublaslt", cu, tc, rel);
      out += buf;
      first = false;
    }
    for (void* p : ws) CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(o));
    CK(cudaFree(o2));
  }
  out += "]}\n";
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) return 1;
    std::fputs(out.c_str(), f);
    std::fclose(f);
  }
  CK(cudaStreamDestroy(s));
  return 0;
}
