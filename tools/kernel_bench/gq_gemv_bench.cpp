// Quantised decode GEMV benchmark: the integer GEMV with int8 activation codes (dp4a) and with
// int16 codes (dp2a, the default), the CUDA-core fp32 GEMV and the 16-bit tensor-core-fragment
// GEMV (gemv_gq16) on int4 (group 128, as --quantize int4) and int8 (per channel) weights, fp16
// activations, 1-8 tokens, the linears of Llama-3.2-1B and Llama-3.1-8B. Each case runs as a CUDA
// graph of back-to-back calls (as the engine's decode step), rotating over enough copies of the
// matrix that L2 (50 MB on an H100) never holds the one being read. One line per case: us per
// call, GB/s of weight bytes, int16 / dp4a and gemv_gq16 / dp4a; first the device-to-device copy
// bandwidth of this run.
//   gq-gemv-bench [--quick] [--no-pdl] [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/launchers.h"
#include "bench_util.h"

namespace {

using namespace lite_llama::cuda;

size_t gq_row_bytes(int kind, int group, int K) {
  const size_t codes = kind == 1 ? size_t(K) / 2 : size_t(K);
  const size_t groups = group ? size_t(K / group) : 1;
  return codes + (groups + 3) / 4 * 16;
}

struct Shape {
  const char* model;
  const char* name;
  int N, K;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, pdl = true;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--no-pdl") == 0) pdl = false;
    else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: gq-gemv-bench [--quick] [--no-pdl] [--json FILE]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  pdl = pdl && prop.major >= 9;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::string out = "{\"device\": \"" + std::string(prop.name) + "\", \"pdl\": " + (pdl ? "true" : "false");
  std::printf("device %s, %d SMs, L2 %d MB, pdl %d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              int(pdl));

  // Copy bandwidth: bytes read + written per second of a 1 GiB device-to-device copy.
  const double copy_gbs = copy_bandwidth_gbs(size_t(1) << 30, s);
  std::printf("copy d2d: %.1f GB/s (read + write)\n", copy_gbs);
  char buf[1024];
  std::snprintf(buf, sizeof buf, ", \"copy_GBps\": %.1f, \"cases\": [", copy_gbs);
  out += buf;

  const Shape shapes[] = {{"1B", "qkv", 3072, 2048},   {"1B", "o", 2048, 2048},     {"1B", "gate_up", 16384, 2048},
                          {"1B", "down", 2048, 8192},  {"8B", "qkv", 6144, 4096},   {"8B", "o", 4096, 4096},
                          {"8B", "gate_up", 28672, 4096}, {"8B", "down", 4096, 14336}};
  const int tokens[] = {1, 2, 3, 4, 8};
  const size_t kRotateBytes = size_t(prop.l2CacheSize) * 4;  // copies read in turn: L2 misses
  void* scratch = dev_alloc(kGqScratchBytes);
  bool first = true;
  std::printf("%-3s %-8s %5s %5s %4s %2s | %8s %8s %8s %8s %8s | %7s %7s %7s | %8s %8s %9s %9s\n", "mdl", "linear",
              "N", "K", "w", "T", "dp4a us", "dp4a+q", "i16 us", "fp32 us", "g16 us", "dp4aGB/s", "i16GB/s",
              "g16GB/s", "i16/dp4a", "g16/dp4a", "i16reldif", "g16reldif");
  for (int kind : {1, 0}) {  // int4 (group 128), int8 (per channel)
    const int group = kind == 1 ? 128 : 0;
    for (const Shape& sh : shapes) {
      if (quick && std::strcmp(sh.model, "8B") == 0) continue;
      const int N = sh.N, K = sh.K;
      const size_t rb = gq_row_bytes(kind, group, K), wbytes = rb * size_t(N);
      const int copies = int(std::max<size_t>(2, (kRotateBytes + wbytes - 1) / wbytes));
      const GqArgs q{kind, group, rb, pdl, prop.multiProcessorCount};
      std::vector<void*> ws(static_cast<size_t>(copies));
      {
        void* w16 = dev_alloc(size_t(N) * K * 2);
        CK(random_fill(Act::F16, w16, size_t(N) * K, 7, 0.02f, s));
        ws[0] = dev_alloc(wbytes);
        CK(quantize_gq(Act::F16, q, w16, ws[0], N, K, s));
        for (int c = 1; c < copies; ++c) {
          ws[size_t(c)] = dev_alloc(wbytes);
          CK(cudaMemcpyAsync(ws[size_t(c)], ws[0], wbytes, cudaMemcpyDeviceToDevice, s));
        }
        CK(cudaStreamSynchronize(s));
        CK(cudaFree(w16));
      }
      void* x = dev_alloc(size_t(8) * K * 2);
      CK(random_fill(Act::F16, x, size_t(8) * K, 11, 1.f, s));
      void* o = dev_alloc(size_t(8) * N * 4);
      void* o2 = dev_alloc(size_t(8) * N * 4);
      const int calls = std::max(copies, 64 / copies * copies);
      for (int T : tokens) {
        auto w_of = [&](int i) { return ws[size_t(i % copies)]; };
        // The integer forms already in the scratch (written by the norm / SwiGLU in the engine).
        const GqX i8{scratch, false}, i16{scratch, true, kind == 1};
        CK(gemv_gq(Act::F16, q, x, ws[0], nullptr, o, false, T, N, K, N, i8, false, s));
        const double dp4a = graph_us(s, [&](int i) {
          CK(gemv_gq(Act::F16, q, x, w_of(i), nullptr, o, false, T, N, K, N, i8, true, s));
        }, calls, 7);
        const double dp4a_q = graph_us(s, [&](int i) {
          CK(gemv_gq(Act::F16, q, x, w_of(i), nullptr, o, false, T, N, K, N, i8, false, s));
        }, calls, 7);
        CK(gemv_gq(Act::F16, q, x, ws[0], nullptr, o, false, T, N, K, N, i16, false, s));
        const double w16 = graph_us(s, [&](int i) {
          CK(gemv_gq(Act::F16, q, x, w_of(i), nullptr, o, false, T, N, K, N, i16, true, s));
        }, calls, 7);
        const double f32 = graph_us(s, [&](int i) {
          CK(gemv_gq_fp32(Act::F16, q, x, w_of(i), nullptr, o, false, T, N, K, N, s));
        }, calls, 7);
        const double g16 = graph_us(s, [&](int i) {
          CK(gemv_gq16(Act::F16, q, x, w_of(i), nullptr, o, false, T, N, K, N, s));
        }, calls, 7);
        // Sanity: each against the fp32 GEMV (fp32 outputs), max |diff| / max |ref|.
        auto rel_diff = [&](const std::function<void(void*)>& fn) {
          CK(gemv_gq_fp32(Act::F16, q, x, ws[0], nullptr, o, true, T, N, K, N, s));
          fn(o2);
          std::vector<float> a(size_t(T) * N), b(a.size());
          CK(cudaMemcpyAsync(a.data(), o, a.size() * 4, cudaMemcpyDeviceToHost, s));
          CK(cudaMemcpyAsync(b.data(), o2, b.size() * 4, cudaMemcpyDeviceToHost, s));
          CK(cudaStreamSynchronize(s));
          double amax = 0, dmax = 0;
          for (size_t i = 0; i < a.size(); ++i) {
            amax = std::max(amax, double(std::fabs(a[i])));
            dmax = std::max(dmax, double(std::fabs(a[i] - b[i])));
          }
          return amax > 0 ? dmax / amax : dmax;
        };
        const double rel16 = rel_diff([&](void* d) {
          CK(gemv_gq(Act::F16, q, x, ws[0], nullptr, d, true, T, N, K, N, i16, false, s));
        });
        const double relg = rel_diff([&](void* d) { CK(gemv_gq16(Act::F16, q, x, ws[0], nullptr, d, true, T, N, K, N, s)); });
        const double gb = double(wbytes) / 1e3;  // GB/s = bytes / us / 1e3
        std::printf("%-3s %-8s %5d %5d %4s %2d | %8.2f %8.2f %8.2f %8.2f %8.2f | %7.0f %7.0f %7.0f | %8.3f %8.3f %9.2e %9.2e\n",
                    sh.model, sh.name, N, K, kind == 1 ? "int4" : "int8", T, dp4a, dp4a_q, w16, f32, g16, gb / dp4a,
                    gb / w16, gb / g16, w16 / dp4a, g16 / dp4a, rel16, relg);
        std::fflush(stdout);
        std::snprintf(buf, sizeof buf,
                      "%s{\"model\": \"%s\", \"linear\": \"%s\", \"N\": %d, \"K\": %d, \"w\": \"%s\", \"T\": %d, "
                      "\"dp4a_us\": %.3f, \"dp4a_quant_us\": %.3f, \"int16_us\": %.3f, \"fp32_us\": %.3f, "
                      "\"gq16_us\": %.3f, \"int16_over_dp4a\": %.4f, \"gq16_over_dp4a\": %.4f, "
                      "\"int16_max_rel_diff\": %.3e, \"gq16_max_rel_diff\": %.3e}",
                      first ? "" : ", ", sh.model, sh.name, N, K, kind == 1 ? "int4" : "int8", T, dp4a, dp4a_q, w16,
                      f32, g16, w16 / dp4a, g16 / dp4a, rel16, relg);
        out += buf;
        first = false;
      }
      for (void* p : ws) CK(cudaFree(p));
      CK(cudaFree(x));
      CK(cudaFree(o));
      CK(cudaFree(o2));
    }
  }
  out += "]}\n";
  if (json) {
    FILE* f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json);
      return 1;
    }
    std::fputs(out.c_str(), f);
    std::fclose(f);
  }
  CK(cudaFree(scratch));
  CK(cudaStreamDestroy(s));
  return 0;
}
