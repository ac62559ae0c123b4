// Attention kernel benchmark: prefill flash attention in TFLOP/s and decode attention in GB/s of
// K/V read, each beside the limits measured in the same run (device-to-device copy bandwidth and a
// large bf16 cuBLASLt GEMM). One JSON object per line on stdout.
//   attention-bench [--quick]
//   attention-bench --prefill D TOKENS [mma|wgmma] [PREFIX] [BATCH] [WG3_WAVES] | --decode D BATCH CONTEXT [SPLITS (0: auto)] [STAGES] [PDL]
//     [MAX_CARVEOUT (default 1: CudaTuning::decode_max_carveout)]
//     (one case, e.g. under ncu)
//   attention-bench --chunk D TOKENS PREFIX [SPLITS [WGMMA_SPLITS [COLD]]]   (a short chunk after a cached prefix)
//   attention-bench --timeline D BATCH CONTEXT PDL [SPLITS] [STAGES]   (builds with
//     -DLITE_LLAMA_DECODE_TIMELINE=ON: each decode block's phases; tools/kernel_bench/decode_timeline.py)
// Decode reads its contiguous slots as runs (CudaTuning::decode_kv_runs), as the engine does;
// LITE_LLAMA_DECODE_KV_RUNS=0 reads every slot id from the table instead.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/launchers.h"
#include "lite_llama/backend_options.h"
#include "bench_util.h"

namespace {

using namespace lite_llama::cuda;

// Median milliseconds of `reps` timed runs after two warm-ups.
double time_ms(const std::function<void()>& fn, int reps) {
  fn();
  fn();
  return median_ms(nullptr, reps, fn);
}

// Whether decode calls pass their sequences' contiguous slots as runs (AttnArgs::b_kv_runs).
bool g_kv_runs = lite_llama::CudaTuning{}.decode_kv_runs;

// Sequences of `ctx` keys in a pool of contiguous slots, one request row each. K and V lie in one
// block, V after K, as the engine's KV cache lays out a layer (model/kv_cache.cpp): at `kv` if
// given (decode_pools' layers), else in a block of the pool's own.
struct Pool {
  void *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *own_kv = nullptr;
  int32_t *q_start, *q_len, *seq_len, *req_idx, *table, *runs;
  float* partial = nullptr;
  AttnArgs args{};
  // Each sequence: q_len_each new queries at the end of ctx keys.
  Pool(int B, int q_len_each, int ctx, int Hq, int Hkv, int D, int sms, void* kv = nullptr) {
    const size_t T = size_t(B) * q_len_each, slots = size_t(B) * ctx, bytes = slots * Hkv * D * 2;
    q = dev_alloc(T * Hq * D * 2);
    out = dev_alloc(T * Hq * D * 2);
    if (!kv) own_kv = kv = dev_alloc(2 * bytes);
    k = kv, v = static_cast<char*>(kv) + bytes;
    CK(random_fill(Act::BF16, q, T * Hq * D, 1, 1.f, nullptr));
    CK(random_fill(Act::BF16, k, slots * Hkv * D, 2, 1.f, nullptr));
    CK(random_fill(Act::BF16, v, slots * Hkv * D, 3, 1.f, nullptr));
    std::vector<int32_t> qs(B), ql(B, q_len_each), sl(B, ctx), ri(B), tab(slots), run(2 * B);
    for (int b = 0; b < B; ++b) qs[b] = b * q_len_each, ri[b] = b, run[2 * b] = b * ctx, run[2 * b + 1] = ctx;
    for (size_t i = 0; i < slots; ++i) tab[i] = int32_t(i);
    auto up = [](const std::vector<int32_t>& h) {
      auto* d = static_cast<int32_t*>(dev_alloc(h.size() * 4));
      CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
      return d;
    };
    q_start = up(qs), q_len = up(ql), seq_len = up(sl), req_idx = up(ri), table = up(tab), runs = up(run);
    partial = static_cast<float*>(dev_alloc(decode_workspace_bytes(B, Hq, D, sms)));
    args = AttnArgs{q, k, v, out, q_start, q_len, seq_len, req_idx, table, ctx, B, q_len_each, ctx,
                    Hq, Hkv, D, 1.f / std::sqrt(float(D)), g_kv_runs ? runs : nullptr};
  }
  ~Pool() {
    for (void* p : {q, own_kv, out, static_cast<void*>(q_start), static_cast<void*>(q_len),
                    static_cast<void*>(seq_len), static_cast<void*>(req_idx), static_cast<void*>(table), static_cast<void*>(runs),
                    static_cast<void*>(partial)})
      cudaFree(p);
  }
};

// K and V bytes (bf16) of B sequences of ctx keys, Hkv heads of D.
double kv_bytes(int D, int B, int ctx, int Hkv) { return 2.0 * B * double(ctx) * Hkv * D * 2; }

// One short chunk of L queries after P cached keys (Hq 32, Hkv 8): the key-split mma.sync prefill
// (`splits`, 0: prefill_splits' choice) beside the unsplit one, and with wgmma (the GPU runs the
// sm_90a kernel) what the CUDA backend runs (prefill_splits' choice with wgmma; wgmma_splits > 0:
// that many splits of the wgmma kernel) and what it ran with CudaTuning::prefill_wgmma_split off,
// one JSON line; copy_gbs 0 leaves out the ratio to the copy bandwidth. Forced split counts are
// cut to what the workspace holds. cold: each timed call reads another copy of the K/V (>= 256
// MiB in all), as a model step's layers do, not K/V left in L2 by the call before.
void chunk_case(int D, int L, int P, int splits, int sms, int reps, double copy_gbs, bool wgmma, int wgmma_splits = 0,
                bool cold = false) {
  const int n = cold ? int(std::clamp(std::ceil(double(256 << 20) / kv_bytes(D, 1, P + L, 8)), 2.0, 32.0)) : 1;
  std::vector<std::unique_ptr<Pool>> pools;
  for (int i = 0; i < n; ++i) pools.push_back(std::make_unique<Pool>(1, L, P + L, 32, 8, D, sms));
  int next = 0;
  auto pool = [&]() -> Pool& { return *pools[size_t(next++ % n)]; };
  const Pool& p = *pools[0];
  const int rows = workspace_rows_per_head(D, sms), max_splits = std::max(1, rows / L);
  splits = splits <= 0 ? prefill_splits(p.args, L, sms, rows) : std::min(splits, max_splits);
  wgmma_splits = std::min(wgmma_splits, max_splits);
  const double one = time_ms([&] { CK(attention_prefill(Act::BF16, pool().args, 1, nullptr, nullptr)); }, reps);
  const double ms = time_ms([&] {
    Pool& q = pool();
    CK(attention_prefill(Act::BF16, q.args, splits, q.partial, nullptr));
  }, reps);
  const double gbs = kv_bytes(D, 1, P + L, 8) / ms / 1e6;
  std::printf("{\"kernel\": \"prefill_chunk\", \"D\": %d, \"tokens\": %d, \"prefix\": %d, \"cold\": %d, \"splits\": %d, "
              "\"us\": %.1f, \"us_unsplit\": %.1f, \"kv_GB/s\": %.1f",
              D, L, P, int(cold), splits, ms * 1e3, one * 1e3, gbs);
  if (wgmma) {
    const lite_llama::CudaTuning t;
    auto run = [&](bool wgmma_split, int s) {
      if (s <= 0) s = prefill_splits(p.args, L, sms, rows, true, wgmma_split);
      const double ms = time_ms([&] {
        Pool& q = pool();
        CK(attention_prefill(Act::BF16, q.args, s, q.partial, nullptr, true, t.prefill_wg3_waves, sms, wgmma_split));
      }, reps);
      return std::pair{s, ms * 1e3};
    };
    const auto wg = run(true, wgmma_splits), mma = run(false, 0);  // forced counts are the wgmma kernel's
    const auto& [s, us] = t.prefill_wgmma_split ? wg : mma;
    const auto& [s_off, us_off] = t.prefill_wgmma_split ? mma : wg;
    std::printf(", \"backend_splits\": %d, \"us_backend\": %.1f, \"wgmma_split\": %d, \"other_splits\": %d, "
                "\"us_other\": %.1f",
                s, us, int(t.prefill_wgmma_split), s_off, us_off);
  }
  if (copy_gbs > 0) std::printf(", \"of_copy\": %.3f", gbs / copy_gbs);
  std::printf("}\n");
}

// Microseconds per decode call (attention and merge), replayed from a graph over enough pools
// (>= 256 MiB of K/V in all) that each call reads its K/V from HBM, not from the 50 MB L2. With
// pdl both kernels are launched as a decode step launches them on sm_90 (CudaTuning::pdl_attention):
// a call's merge, and the next call's first K/V loads, start while the kernel before them ends.
// The pools decode calls cycle through: enough (>= 256 MiB of K/V, at most 32) that no call's K/V
// is still in L2 from the call before.
// Their K/V lie in one block, pool after pool, as the engine's layers do, allocated at start for
// every cell as the engine allocates its KV cache once. With a block allocated (and freed) per
// cell, after the copy, GEMM and prefill buffers came and went, some cells read 5-10% slower
// (H200: D 128 batch 1 at 16k / 32k 21.0 / 38.0 us against 19.6 / 35.1; D 64 batch 4 at 8k 21.3
// against 19.9), and those in a process of their own (--decode) as fast as with the block.
void* g_kv_arena = nullptr;
constexpr size_t kKvArenaBytes = size_t(17) << 29;  // 8.5 GiB: the largest cell (D 128, batch 64, 32k) takes 8
struct DecodePools {
  void* kv = nullptr;
  std::vector<std::unique_ptr<Pool>> pools;
  ~DecodePools() {
    pools.clear();
    if (kv != g_kv_arena) cudaFree(kv);
  }
};
std::unique_ptr<DecodePools> decode_pools(int D, int B, int ctx, int Hq, int Hkv, int sms) {
  const int n = int(std::clamp(std::ceil(double(256 << 20) / kv_bytes(D, B, ctx, Hkv)), 1.0, 32.0));
  auto d = std::make_unique<DecodePools>();
  const size_t layer = size_t(kv_bytes(D, B, ctx, Hkv));
  d->kv = g_kv_arena && size_t(n) * layer <= kKvArenaBytes ? g_kv_arena : dev_alloc(size_t(n) * layer);
  for (int i = 0; i < n; ++i)
    d->pools.push_back(std::make_unique<Pool>(B, 1, ctx, Hq, Hkv, D, sms, static_cast<char*>(d->kv) + size_t(i) * layer));
  return d;
}

double decode_us(int D, int B, int ctx, int Hq, int Hkv, int splits, int sms, int reps, int stages = 4,
                 bool pdl = false, bool max_carveout = true) {
  const std::unique_ptr<DecodePools> d = decode_pools(D, B, ctx, Hq, Hkv, sms);
  const std::vector<std::unique_ptr<Pool>>& pools = d->pools;
  const int n = int(pools.size());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaDeviceSynchronize());
  const int calls = std::max(reps, n);
  const double us = graph_us(s, [&](int i) {
    const Pool& p = *pools[size_t(i % n)];
    CK(attention_decode(Act::BF16, p.args, splits, 16, p.partial, s, pdl, stages, max_carveout));
  }, calls, 3);
  CK(cudaStreamDestroy(s));
  return us;
}

// Microseconds per device-to-device copy that moves `bytes` (bytes / 2 read, bytes / 2 written),
// replayed from a graph over buffers of >= 256 MiB in all, as decode_us replays its calls: what
// one call of that size costs a plain copy, launch and ramp included.
double copy_us(double bytes, int reps) {
  const size_t half = size_t(bytes / 2);
  const int n = int(std::clamp(std::ceil(double(256 << 20) / bytes), 1.0, 32.0));
  std::vector<void*> bufs;
  for (int i = 0; i < 2 * n; ++i) {
    bufs.push_back(dev_alloc(half));
    CK(cudaMemset(bufs.back(), 1, half));
  }
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double us = graph_us(s, [&](int i) {
    CK(cudaMemcpyAsync(bufs[size_t(2 * (i % n))], bufs[size_t(2 * (i % n) + 1)], half, cudaMemcpyDeviceToDevice, s));
  }, std::max(reps, n), 3);
  CK(cudaStreamDestroy(s));
  for (void* p : bufs) cudaFree(p);
  return us;
}

#ifdef LITE_LLAMA_DECODE_TIMELINE
// One replay of a graph of decode calls (as decode_us builds it) with the kernels' timeline on:
// the records as decode_timeline_dump writes them (tools/kernel_bench/decode_timeline.py reads them).
void decode_timeline(int D, int B, int ctx, bool pdl, int splits, int stages, int sms) {
  const std::unique_ptr<DecodePools> d = decode_pools(D, B, ctx, 32, 8, sms);
  const std::vector<std::unique_ptr<Pool>>& pools = d->pools;
  const int n = int(pools.size());
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int calls = std::max(16, n);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < calls; ++i) {
    const Pool& p = *pools[size_t(i % n)];
    CK(attention_decode(Act::BF16, p.args, splits, 16, p.partial, s, pdl, stages));
  }
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 3; ++r) CK(cudaGraphLaunch(exec, s));
  CK(cudaStreamSynchronize(s));
  decode_timeline_reset();
  CK(cudaGraphLaunch(exec, s));
  CK(cudaStreamSynchronize(s));
  const std::string head = "timeline D " + std::to_string(D) + " batch " + std::to_string(B) + " context " +
                           std::to_string(ctx) + " pdl " + std::to_string(int(pdl)) + " splits " +
                           std::to_string(splits) + " stages " + std::to_string(stages) + " calls " +
                           std::to_string(calls);
  decode_timeline_dump(stdout, head.c_str());
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaStreamDestroy(s));
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (const char* e = std::getenv("LITE_LLAMA_DECODE_KV_RUNS")) g_kv_runs = std::strcmp(e, "0") != 0;
  if (cudaMalloc(&g_kv_arena, kKvArenaBytes) != cudaSuccess) g_kv_arena = nullptr, cudaGetLastError();  // small GPUs: per cell
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const bool wgmma_gpu = attention_prefill_sm90_built() && prop.major == 9 && prop.minor == 0;  // as the backend checks
  if (argc >= 4 && std::strcmp(argv[1], "--prefill") == 0) {
    const int D = std::atoi(argv[2]), L = std::atoi(argv[3]);
    const bool wgmma = !(argc >= 5 && std::strcmp(argv[4], "mma") == 0);
    const int P = argc >= 6 ? std::atoi(argv[5]) : 0;  // cached keys before the chunk
    const int B = argc >= 7 ? std::max(1, std::atoi(argv[6])) : 1;  // sequences of L tokens each
    const int waves = argc >= 8 ? std::atoi(argv[7]) : lite_llama::CudaTuning{}.prefill_wg3_waves;
    Pool p(B, L, P + L, 32, 8, D, sms);
    const double ms = time_ms([&] { CK(attention_prefill(Act::BF16, p.args, 1, nullptr, nullptr, wgmma, waves, sms)); }, 5);
    std::printf("prefill D %d tokens %d prefix %d batch %d wg3_waves %d (%s): %.4f ms\n", D, L, P, B, waves,
                wgmma ? "wgmma" : "mma.sync", ms);
    return 0;
  }
  if (argc >= 5 && std::strcmp(argv[1], "--chunk") == 0) {
    chunk_case(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), argc >= 6 ? std::atoi(argv[5]) : 0, sms,
               20, 0, wgmma_gpu, argc >= 7 ? std::atoi(argv[6]) : 0, argc >= 8 && std::atoi(argv[7]) != 0);
    return 0;
  }
#ifdef LITE_LLAMA_DECODE_TIMELINE
  if (argc >= 6 && std::strcmp(argv[1], "--timeline") == 0) {
    const int D = std::atoi(argv[2]), B = std::atoi(argv[3]), ctx = std::atoi(argv[4]);
    const int given = argc >= 7 ? std::atoi(argv[6]) : 0;
    const int stages = argc >= 8 ? std::atoi(argv[7]) : decode_stages(B, 8, D, sms, 4);
    decode_timeline(D, B, ctx, std::atoi(argv[5]) != 0, given > 0 ? given : decode_splits(B, 8, D, ctx, sms, 16, stages),
                    stages, sms);
    return 0;
  }
#endif
  if (argc >= 5 && std::strcmp(argv[1], "--decode") == 0) {
    const int D = std::atoi(argv[2]), B = std::atoi(argv[3]), ctx = std::atoi(argv[4]);
    const int given = argc >= 6 ? std::atoi(argv[5]) : 0;
    const int stages = argc >= 7 ? std::atoi(argv[6]) : decode_stages(B, 8, D, sms, 4);
    const int splits = given > 0 ? given : decode_splits(B, 8, D, ctx, sms, 16, stages);
    const bool pdl = argc >= 8 && std::atoi(argv[7]) != 0;
    const bool carveout = argc < 9 || std::atoi(argv[8]) != 0;
    const double us = decode_us(D, B, ctx, 32, 8, splits, sms, 20, stages, pdl, carveout);
    std::printf("decode D %d batch %d context %d splits %d stages %d pdl %d max_carveout %d: %.1f us, %.1f GB/s of K/V\n",
                D, B, ctx, splits, stages, int(pdl), int(carveout), us, kv_bytes(D, B, ctx, 8) / us / 1e3);
    return 0;
  }
  std::printf("{\"device\": \"%s\", \"sms\": %d}\n", prop.name, sms);

  // Copy bandwidth: bytes read + written per second of a 2 GiB device-to-device copy.
  const double copy_gbs = copy_bandwidth_gbs(size_t(2) << 30, nullptr, 10);
  std::printf("{\"kernel\": \"copy\", \"GB/s\": %.1f}\n", copy_gbs);
  // Tensor-core peak: bf16 GEMM 8192^3 through cuBLASLt.
  double gemm_tflops = 0;
  {
    const int n = 8192;
    void* x = dev_alloc(size_t(n) * n * 2);
    void* w = dev_alloc(size_t(n) * n * 2);
    void* o = dev_alloc(size_t(n) * n * 2);
    CK(random_fill(Act::BF16, x, size_t(n) * n, 4, 1.f, nullptr));
    CK(random_fill(Act::BF16, w, size_t(n) * n, 5, 1.f, nullptr));
    Gemm gemm(size_t(64) << 20);
    const double ms = time_ms([&] { gemm.run(Act::BF16, x, w, nullptr, o, false, n, n, n, nullptr); }, 10);
    gemm_tflops = 2.0 * n * n * double(n) / ms / 1e9;
    std::printf("{\"kernel\": \"gemm_bf16_8192\", \"TFLOP/s\": %.1f}\n", gemm_tflops);
    cudaFree(x), cudaFree(w), cudaFree(o);
  }

  const int Hq = 32, Hkv = 8;
  const std::vector<int> prefill_lens = quick ? std::vector<int>{8192} : std::vector<int>{2048, 8192, 16384, 32768};
  // "prefill": the kernel the engine runs (wgmma where sm_90a code was built); "prefill_mma_sync":
  // the mma.sync kernel, which sm_80 and split chunks use, for comparison.
  std::vector<bool> paths = {false};
  if (wgmma_gpu) paths.insert(paths.begin(), true);
  for (int D : {64, 128})
    for (int L : prefill_lens)
      for (bool wgmma : paths) {
        Pool p(1, L, L, Hq, Hkv, D, sms);
        const double ms = time_ms([&] { CK(attention_prefill(Act::BF16, p.args, 1, nullptr, nullptr, wgmma,
                                                             lite_llama::CudaTuning{}.prefill_wg3_waves, sms)); },
                                  quick ? 3 : 5);
        const double flops = 4.0 * D * Hq * (double(L) * (L + 1) / 2);
        const double tf = flops / ms / 1e9;
        std::printf("{\"kernel\": \"%s\", \"D\": %d, \"Hq\": %d, \"Hkv\": %d, \"tokens\": %d, \"ms\": %.3f, "
                    "\"TFLOP/s\": %.1f, \"of_gemm_peak\": %.3f}\n",
                    wgmma || paths.size() == 1 ? "prefill" : "prefill_mma_sync", D, Hq, Hkv, L, ms, tf,
                    tf / gemm_tflops);
      }
  // The next turn of a cached chat: a short chunk after a long prefix, keys split over blocks.
  for (int D : {64, 128})
    for (int P : quick ? std::vector<int>{4096} : std::vector<int>{4096, 16384, 32768})
      for (int L : {48, 256}) chunk_case(D, L, P, 0, sms, 10, copy_gbs, paths.front());
  const std::vector<int> ctxs = quick ? std::vector<int>{8192} : std::vector<int>{8192, 16384, 32768};
  // "decode": calls one after another with plain launches (each call's launch, ramp and merge in
  // full); "decode_pdl": launched as a decode step launches them on sm_90 (PDL). "copy_us": a
  // device copy moving the same bytes in one call (of_same_copy: its time over the call's), up to
  // 256 MiB.
  std::vector<bool> pdls = {false};
  if (prop.major >= 9) pdls.push_back(true);
  std::map<double, double> copy_of;  // copy_us by bytes: measured once for both launch modes
  for (bool pdl : pdls)
    for (int D : {64, 128})
      for (int ctx : ctxs)
        for (int B : {1, 4, 16, 64}) {
          const int stages = decode_stages(B, Hkv, D, sms, 4);  // as the engine picks them
          const int splits = decode_splits(B, Hkv, D, ctx, sms, 16, stages);
          const double ms = decode_us(D, B, ctx, Hq, Hkv, splits, sms, quick ? 10 : 40, stages, pdl) / 1e3;
          const double gbs = kv_bytes(D, B, ctx, Hkv) / ms / 1e6;
          std::printf("{\"kernel\": \"%s\", \"D\": %d, \"Hq\": %d, \"Hkv\": %d, \"batch\": %d, "
                      "\"context\": %d, \"splits\": %d, \"us\": %.1f, \"GB/s\": %.1f, \"of_copy\": %.3f",
                      pdl ? "decode_pdl" : "decode", D, Hq, Hkv, B, ctx, splits, ms * 1e3, gbs, gbs / copy_gbs);
          // Only where a call's fixed latency matters: graph-replayed copies of 1 GiB and more ran at
          // 0.65 of the copy bandwidth (H200), which would flatter the kernel.
          const double bytes = kv_bytes(D, B, ctx, Hkv);
          if (bytes <= double(256 << 20)) {
            if (!copy_of.count(bytes)) copy_of[bytes] = copy_us(bytes, quick ? 10 : 40);
            const double cus = copy_of[bytes];
            std::printf(", \"copy_us\": %.1f, \"of_same_copy\": %.3f", cus, cus / (ms * 1e3));
          }
          std::printf("}\n");
        }
  return 0;
}
