// Attention floor: the fastest a split-K decode call can be when its blocks must hold their K/V
// bytes on chip until the query arrives, and the query is written by the kernel before it (PDL), as
// in a decode step and in attention-bench's chained calls. Each block streams its contiguous range
// through a ring of `stages` tiles of 16 KiB in shared memory (cp.async); `pre` tiles are requested
// before griddepcontrol.wait, the rest after it; after the wait it loads a 512-byte "query" that the
// previous call's merge wrote, then consumes every tile (XOR with the query word: each byte is read
// from shared memory once) and writes one word. The merge (32 blocks) waits, reads every block's
// word and writes the next call's query. No metadata or slot-id trips, no compute: a lower bound.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

constexpr int kTile = 16 << 10;  // 64 keys x 256 bytes (D 64 K + V)
constexpr int kThreads = 128;

__device__ __forceinline__ void cp16(void* s, const void* g) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(a), "l"(g));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void wait_group() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// Issue tile t of this block's range into ring slot t % stages (partial last tile).
__device__ __forceinline__ void issue(uint8_t* ring, const uint8_t* src, size_t bytes, int t, int stages) {
  const size_t off = size_t(t) * kTile;
  uint8_t* dst = ring + size_t(t % stages) * kTile;
  for (int i = threadIdx.x * 16; i < kTile; i += kThreads * 16)
    if (off + i < bytes) cp16(dst + i, src + off + i);
  commit();
}

template <bool PDL>
__global__ void __launch_bounds__(kThreads) hold_kernel(const uint8_t* __restrict__ buf, size_t per, int stages, int pre,
                                                        const unsigned* q, unsigned* __restrict__ partial) {
  extern __shared__ __align__(16) uint8_t ring[];
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");
  const uint8_t* src = buf + size_t(blockIdx.x) * per;
  const int ntiles = int((per + kTile - 1) / kTile);
  const int first = min(pre, min(stages, ntiles));
  for (int t = 0; t < first; ++t) issue(ring, src, per, t, stages);
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  const unsigned qw = __ldcg(q + (threadIdx.x & 127));
  int issued = first;
  for (; issued < min(stages, ntiles); ++issued) issue(ring, src, per, issued, stages);
  unsigned acc = 0;
  for (int t = 0; t < ntiles; ++t) {
    // Tiles t .. issued - 1 are in flight: wait for tile t (groups committed after it may pend).
    const int pending = issued - t - 1;
    switch (min(pending, 11)) {
      case 11: wait_group<11>(); break; case 10: wait_group<10>(); break; case 9: wait_group<9>(); break;
      case 8: wait_group<8>(); break; case 7: wait_group<7>(); break; case 6: wait_group<6>(); break;
      case 5: wait_group<5>(); break; case 4: wait_group<4>(); break; case 3: wait_group<3>(); break;
      case 2: wait_group<2>(); break; case 1: wait_group<1>(); break; default: wait_group<0>();
    }
    __syncthreads();
    const uint4* s = reinterpret_cast<const uint4*>(ring + size_t(t % stages) * kTile);
    const size_t off = size_t(t) * kTile;
    for (int i = threadIdx.x; i < kTile / 16; i += kThreads)
      if (off + size_t(i) * 16 < per) { const uint4 v = s[i]; acc ^= (v.x ^ v.y ^ v.z ^ v.w) * qw; }
    __syncthreads();
    if (issued < ntiles) issue(ring, src, per, issued++, stages);
  }
  for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  __shared__ unsigned w[kThreads / 32];
  if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) partial[blockIdx.x] = w[0] ^ w[1] ^ w[2] ^ w[3];
}

template <bool PDL>
__global__ void merge_kernel(const unsigned* __restrict__ partial, int n, unsigned* __restrict__ q_next) {
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned a = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) a ^= __ldcg(partial + i);
  for (int o = 16; o; o >>= 1) a ^= __shfl_xor_sync(0xffffffffu, a, o);
  if ((threadIdx.x & 31) == 0) q_next[blockIdx.x * 4 + (threadIdx.x >> 5) % 4] = a | 1u;
}

template <class K, class... A>
void launch(K k, dim3 g, dim3 b, size_t smem, cudaStream_t s, bool pdl, A... a) {
  cudaLaunchConfig_t c{};
  c.gridDim = g, c.blockDim = b, c.stream = s, c.dynamicSmemBytes = smem;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at, c.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&c, k, a...));
}

template <class F>
double graph_us(cudaStream_t s, F call, int calls) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < calls; ++i) call(i);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&e, g, 0));
  for (int r = 0; r < 2; ++r) CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  std::vector<float> t;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(a, s);
    CK(cudaGraphLaunch(e, s));
    cudaEventRecord(b, s);
    CK(cudaEventSynchronize(b));
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaGraphExecDestroy(e), cudaGraphDestroy(g);
  cudaEventDestroy(a), cudaEventDestroy(b);
  return t[2] * 1e3 / calls;
}

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double copy_gbs;
  {
    const size_t n = size_t(2) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n)); CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    std::vector<float> t;
    for (int r = 0; r < 10; ++r) {
      cudaEventRecord(e0, s);
      CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
      cudaEventRecord(e1, s);
      CK(cudaEventSynchronize(e1));
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    copy_gbs = 2.0 * n / t[5] / 1e6;
    cudaFree(a), cudaFree(b);
  }
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"copy_gbs\": %.1f}\n", prop.name, sms, copy_gbs);
  for (auto k : {hold_kernel<true>, hold_kernel<false>})
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 226 << 10));
  unsigned *part, *q;
  CK(cudaMalloc(&part, 1 << 20)); CK(cudaMalloc(&q, 1 << 12));
  CK(cudaMemset(q, 1, 1 << 12));
  for (double mib : {16.0, 32.0, 64.0}) {
    const size_t bytes = size_t(mib * (1 << 20));
    const int nbuf = 40;
    std::vector<uint8_t*> bufs(nbuf);
    for (auto& p : bufs) { CK(cudaMalloc(&p, bytes)); CK(cudaMemset(p, 1, bytes)); }
    // bps: blocks an SM (smem split evenly, as the decode kernel's 73 KiB blocks at 3 an SM);
    // stages: ring tiles (<= what the block's smem holds); pre: tiles requested before the wait.
    // slots: blocks an SM the shared memory allows; above bps, the next call's blocks may start on
    // an SM while this call's blocks still hold it.
    for (int bps : {3, 4, 2})
     for (int slots : {bps, bps + 1, bps + 2, 2 * bps})
      for (int stages : {2, 3, 4, 6, 8, 12})
        for (int pre : {0, 1, 2, 3, 99})
          for (int pdl = 0; pdl < 2; ++pdl) {
            if (slots > bps && !pdl) continue;
            const size_t smem = size_t(((228 << 10) / slots - (1 << 10) - 64) & ~1023);
            if (size_t(stages) * kTile > smem) continue;
            if (pre != 99 && pre > stages) continue;
            if (!pdl && pre != 99) continue;
            const int grid = bps * sms;
            const size_t per = (bytes / grid) & ~size_t(15);  // the tail of under 16 bytes a block is not read
            const double us = graph_us(s, [&](int i) {
              if (pdl) {
                launch(hold_kernel<true>, dim3(grid), dim3(kThreads), smem, s, true, (const uint8_t*)bufs[i % nbuf], per, stages, pre, (const unsigned*)q, part);
                launch(merge_kernel<true>, dim3(32), dim3(256), 0, s, true, (const unsigned*)part, grid, q);
              } else {
                launch(hold_kernel<false>, dim3(grid), dim3(kThreads), smem, s, false, (const uint8_t*)bufs[i % nbuf], per, stages, pre, (const unsigned*)q, part);
                launch(merge_kernel<false>, dim3(32), dim3(256), 0, s, false, (const unsigned*)part, grid, q);
              }
            }, nbuf);
            const double gbs = bytes / us / 1e3;
            std::printf("{\"MiB\": %.0f, \"slots\": %d, \"blocks_per_sm\": %d, \"stages\": %d, \"pre\": %d, \"pdl\": %d, \"us\": %.2f, \"of_copy\": %.3f}\n",
                        mib, slots, bps, stages, pre, pdl, us, gbs / copy_gbs);
            std::fflush(stdout);
          }
    for (auto p : bufs) cudaFree(p);
  }
  return 0;
}
