// Read floor: the fastest a single kernel call can read N bytes of HBM, for the byte counts of
// decode attention's missed cells (batch 1: D 64 at 8k / 16k / 32k = 16 / 32 / 64 MiB, D 128 at
// 8k / 16k = 32 / 64 MiB). Each block reads one contiguous range with 16-byte loads, U in
// flight a thread, XORs them and writes one word (the "partials"); "+merge" adds a second kernel
// of 32 blocks that reads every block's word, as split-K attention's merge does. Calls are
// replayed from a graph over >= 256 MiB of buffers (no L2 reuse), plain or with PDL (dependents
// may launch at the start; the word is written after griddepcontrol.wait). Sweeps grid, threads
// and U and prints the best per size and mode, as a ratio to a 2 GiB device copy's read + write
// bandwidth (what attention-bench divides by).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); std::exit(1); } } while (0)

template <int U, bool PDL>
__global__ void read_kernel(const uint4* __restrict__ buf, size_t n16, unsigned* __restrict__ partial) {
  extern __shared__ unsigned fill[];
  if (threadIdx.x == 0) fill[0] = 0;
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");
  const size_t per = (n16 + gridDim.x - 1) / gridDim.x;
  const size_t beg = size_t(blockIdx.x) * per, end = min(n16, beg + per);
  unsigned acc = 0;
  for (size_t i = beg + threadIdx.x; i < end; i += size_t(blockDim.x) * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t j = i + size_t(u) * blockDim.x;
      v[u] = j < end ? __ldcg(buf + j) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (int o = 16; o; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  __shared__ unsigned w[32];
  if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0) {
    unsigned a = 0;
    for (int k = 0; k < int(blockDim.x >> 5); ++k) a ^= w[k];
    partial[blockIdx.x] = a;
  }
}

template <bool PDL>
__global__ void merge_kernel(const unsigned* __restrict__ partial, int n, unsigned* __restrict__ out) {
  if (PDL) asm volatile("griddepcontrol.launch_dependents;");
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned a = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) a ^= partial[i];
  for (int o = 16; o; o >>= 1) a ^= __shfl_xor_sync(0xffffffffu, a, o);
  if (threadIdx.x == 0) out[blockIdx.x] = a;
}

template <class K, class... A>
void launch(K k, dim3 g, dim3 b, cudaStream_t s, bool pdl, A... a) {
  cudaLaunchConfig_t c{};
  c.gridDim = g, c.blockDim = b, c.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at, c.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&c, k, a...));
}

template <class K, class... A>
void launch_smem(K k, dim3 g, dim3 b, size_t smem, cudaStream_t s, bool pdl, A... a) {
  cudaLaunchConfig_t c{};
  c.gridDim = g, c.blockDim = b, c.stream = s, c.dynamicSmemBytes = smem;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at, c.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&c, k, a...));
}
using Fn = void (*)(const uint4*, size_t, unsigned*, int, int, bool, size_t, cudaStream_t);
template <int U>
void run_read(const uint4* buf, size_t n16, unsigned* part, int grid, int threads, bool pdl, size_t smem, cudaStream_t s) {
  static bool set = false;
  if (!set) {
    CK(cudaFuncSetAttribute(read_kernel<U, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 226 << 10));
    CK(cudaFuncSetAttribute(read_kernel<U, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, 226 << 10));
    set = true;
  }
  if (pdl) launch_smem(read_kernel<U, true>, dim3(grid), dim3(threads), smem, s, true, buf, n16, part);
  else launch_smem(read_kernel<U, false>, dim3(grid), dim3(threads), smem, s, false, buf, n16, part);
}

// us per call: a graph of `calls` calls cycling through the buffers, replayed; median of 5.
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
  // Copy bandwidth as attention-bench measures it: 2 GiB device copy, read + write.
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
  unsigned *part, *out;
  CK(cudaMalloc(&part, 1 << 20)); CK(cudaMalloc(&out, 1 << 12));
  const Fn fns[] = {run_read<4>, run_read<8>, run_read<16>};
  const int us_[] = {4, 8, 16};
  for (double mib : {16.0, 32.0, 64.0, 128.0}) {
    const size_t bytes = size_t(mib * (1 << 20));
    const int nbuf = 40;  // a buffer for every call of the graph: no call finds another's lines in L2
    std::vector<uint4*> bufs(nbuf);
    for (auto& p : bufs) { CK(cudaMalloc(&p, bytes)); CK(cudaMemset(p, 1, bytes)); }
    const size_t n16 = bytes / 16;
    const int calls = nbuf;
    for (int fillsm = 0; fillsm < 2; ++fillsm)
    for (int merge = 0; merge < 2; ++merge)
      for (int pdl = 0; pdl < 2; ++pdl) {
        if (fillsm && !pdl) continue;
        double best = 1e30;
        int bg = 0, bt = 0, bu = 0;
        for (int gm : {1, 2, 3, 4, 8})
          for (int threads : {128, 256, 512})
            for (int ui = 0; ui < 3; ++ui) {
              if (gm * threads > 2048) continue;
              const int grid = gm * sms;
              // fill: gm blocks take all of an SM's shared memory (228 KiB, 1 KiB reserved a block)
              const size_t smem = fillsm ? size_t(((228 << 10) / gm - (1 << 10) - 64) & ~1023) : 16;
              const double us = graph_us(s, [&](int i) {
                fns[ui](bufs[i % nbuf], n16, part, grid, threads, pdl, smem, s);
                if (merge) {
                  if (pdl) launch(merge_kernel<true>, dim3(32), dim3(256), s, true, (const unsigned*)part, grid, out);
                  else launch(merge_kernel<false>, dim3(32), dim3(256), s, false, (const unsigned*)part, grid, out);
                }
              }, calls);
              if (us < best) best = us, bg = grid, bt = threads, bu = us_[ui];
            }
        const double gbs = bytes / best / 1e3;
        std::printf("{\"fill_sm\": %d, \"MiB\": %.0f, \"merge\": %d, \"pdl\": %d, \"best_us\": %.2f, \"grid\": %d, \"threads\": %d, "
                    "\"U\": %d, \"GB/s\": %.1f, \"of_copy\": %.3f}\n",
                    fillsm, mib, merge, pdl, best, bg, bt, bu, gbs, gbs / copy_gbs);
        std::fflush(stdout);
      }
    for (auto p : bufs) cudaFree(p);
  }
  return 0;
}
