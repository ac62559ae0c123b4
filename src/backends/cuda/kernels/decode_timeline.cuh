// Diagnostic build only (CMake -DLITE_LLAMA_DECODE_TIMELINE=ON): thread 0 of every decode
// attention and merge block stamps the global timer at the kernel's phases and appends one record
// (kind: 1 a split, 3 the split holding the new key, 2 a merge block; the block index; the call's
// partial buffer; 7 stamps; the SM it ran on) to a device array, which attention-bench
// --timeline prints and tools/kernel_bench/decode_timeline.py reads. Included by
// attention_decode.cu only. Without the option the marks compile to nothing.
#pragma once
#ifdef LITE_LLAMA_DECODE_TIMELINE
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace lite_llama::cuda {

constexpr unsigned kTimelineCap = 1u << 16;
constexpr unsigned kSmField = 9;  // after the packed kind and block (0), the call (1), 7 stamps (2-8)
constexpr unsigned kTimelineFields = kSmField + 1;
__device__ unsigned long long g_timeline[kTimelineCap][kTimelineFields];
__device__ unsigned int g_timeline_n;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void timeline_save(unsigned kind, const void* call, const unsigned long long (&tl)[7]) {
  if (threadIdx.x != 0) return;
  const unsigned i = atomicAdd(&g_timeline_n, 1u);
  if (i >= kTimelineCap) return;
  g_timeline[i][0] = (1ull * kind << 48) | (1ull * blockIdx.z << 32) | (1ull * blockIdx.y << 16) | blockIdx.x;
  g_timeline[i][1] = reinterpret_cast<unsigned long long>(call);
  for (int k = 0; k < 7; ++k) g_timeline[i][2 + k] = tl[k];
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  g_timeline[i][kSmField] = sm;
}

void decode_timeline_reset() {
  const unsigned z = 0;
  cudaMemcpyToSymbol(g_timeline_n, &z, sizeof z);
}

std::vector<unsigned long long> decode_timeline_read() {
  unsigned n = 0;
  cudaMemcpyFromSymbol(&n, g_timeline_n, sizeof n);
  n = n < kTimelineCap ? n : kTimelineCap;
  std::vector<unsigned long long> v(size_t(n) * kTimelineFields);
  if (n) cudaMemcpyFromSymbol(v.data(), g_timeline, v.size() * sizeof(v[0]));
  return v;
}

// A line "HEAD records N pools P", then one line a block, "TL kind z y x pool t0..t6 sm" (ns of the
// global timer; pool: the call's partial buffer, numbered as first seen, so that
// tools/kernel_bench/decode_timeline.py can tell calls apart). attention-bench --timeline prints
// them; the CUDA backend writes a model run's to CudaTuning::decode_timeline_out
// (LITE_LLAMA_DECODE_TIMELINE_OUT) when destroyed.
void decode_timeline_dump(FILE* f, const char* head) {
  const std::vector<unsigned long long> v = decode_timeline_read();
  std::vector<unsigned long long> pools;
  for (size_t r = 0; r + kTimelineFields <= v.size(); r += kTimelineFields)
    if (std::find(pools.begin(), pools.end(), v[r + 1]) == pools.end()) pools.push_back(v[r + 1]);
  std::fprintf(f, "%s records %zu pools %zu\n", head, v.size() / kTimelineFields, pools.size());
  for (size_t r = 0; r + kTimelineFields <= v.size(); r += kTimelineFields) {
    const long pool = std::find(pools.begin(), pools.end(), v[r + 1]) - pools.begin();
    std::fprintf(f, "TL %llu %llu %llu %llu %ld", v[r] >> 48, (v[r] >> 32) & 0xffff, (v[r] >> 16) & 0xffff,
                 v[r] & 0xffff, pool);
    for (int k = 0; k < 7; ++k) std::fprintf(f, " %llu", v[r + 2 + k]);
    std::fprintf(f, " %llu", v[r + kSmField]);  // the block's SM
    std::fprintf(f, "\n");
  }
}

}  // namespace lite_llama::cuda

#define TL_BEGIN                                       \
  unsigned long long tl_[7] = {0, 0, 0, 0, 0, 0, 0}; \
  TL_MARK(0)
#define TL_MARK(i)                                           \
  do {                                                       \
    if (threadIdx.x == 0) tl_[i] = ::lite_llama::cuda::global_ns(); \
  } while (0)
#define TL_SAVE(kind, call) ::lite_llama::cuda::timeline_save(kind, call, tl_)
#else
#define TL_BEGIN \
  do {           \
  } while (0)
#define TL_MARK(i) \
  do {             \
  } while (0)
#define TL_SAVE(kind, call) \
  do {                      \
  } while (0)
#endif
