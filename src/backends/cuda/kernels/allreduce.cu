// One-shot all-reduce over peer-mapped memory, for the small messages of tensor-parallel decode
// (a few KiB to a few MiB a call, where NCCL's ring costs ~10 us of latency). The ranks are GPUs
// of one process with peer access: each rank stages its input in its own buffer, block b signals
// block b of every peer and waits for theirs, then reads every rank's staged data and sums it in
// rank order, so all ranks get the same bits. Each block owns the 16-byte units u with
// u % gridDim.x == b whatever the message size, and the staging buffers alternate between calls:
// a rank can only overwrite buffer k after every peer has signalled the call after the one that
// read it, so no closing barrier is needed. Flags and counters live in device memory, so the
// kernel is replayed from CUDA graphs as it is.
#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Block b of every rank meets block b of every other rank: its staged data is published before
// the flag (the block barrier orders every thread's stores before the signalling threads'
// system-scope fence and release, as a grid-wide barrier does with one fencing thread). A peer
// may already be one call ahead (it needs only our signal to go on), hence >= in wrap-around
// arithmetic.
__device__ __forceinline__ void peer_barrier(const PeerArArgs& a, int b, uint32_t flag) {
  __syncthreads();
  if (threadIdx.x < a.size) {
    __threadfence_system();
    st_release_sys(&a.signal[threadIdx.x]->start[b][a.rank], flag);
    const uint32_t* mine = &a.signal[a.rank]->start[b][threadIdx.x];
    while (int32_t(ld_acquire_sys(mine) - flag) < 0) {
    }
  }
  __syncthreads();
}

// Element type of the message: fp32 (the residual stream) or 16-bit, summed in fp32.
template <typename T>
__device__ __forceinline__ void add_unit(const uint4& r, float* acc) {
  if constexpr (sizeof(T) == 4) {
    acc[0] += __uint_as_float(r.x), acc[1] += __uint_as_float(r.y);
    acc[2] += __uint_as_float(r.z), acc[3] += __uint_as_float(r.w);
  } else {
    float f[8];
    unpack8<T>(r, f);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] += f[i];
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack_unit(const float* acc) {
  if constexpr (sizeof(T) == 4)
    return make_uint4(__float_as_uint(acc[0]), __float_as_uint(acc[1]), __float_as_uint(acc[2]), __float_as_uint(acc[3]));
  else
    return pack8<T>(acc);
}

template <typename T>
__global__ void __launch_bounds__(kPeerArThreads) peer_all_reduce_kernel(PeerArArgs a) {
  const int b = blockIdx.x;
  PeerArSignal* me = a.signal[a.rank];
  const uint32_t flag = me->counter[b] + 1;
  const int k = int(flag & 1u);
  uint4* x = static_cast<uint4*>(a.x);
  uint4* mine = static_cast<uint4*>(a.staging[a.rank][k]);
  const int64_t stride = int64_t(gridDim.x) * kPeerArThreads;
  for (int64_t u = int64_t(b) * kPeerArThreads + threadIdx.x; u < a.units; u += stride) mine[u] = x[u];
  peer_barrier(a, b, flag);
  constexpr int kVals = sizeof(T) == 4 ? 4 : 8;
  for (int64_t u = int64_t(b) * kPeerArThreads + threadIdx.x; u < a.units; u += stride) {
    float acc[kVals] = {};
    for (int p = 0; p < a.size; ++p) add_unit<T>(__ldcv(static_cast<const uint4*>(a.staging[p][k]) + u), acc);
    x[u] = pack_unit<T>(acc);
  }
  __syncthreads();
  if (threadIdx.x == 0) me->counter[b] = flag;
}

// The row-parallel projection's all-reduce fused with the next residual add + RMSNorm: block b
// owns the rows r with r % gridDim.x == b (its own flags and staging buffers, apart from
// peer_all_reduce_kernel's, whose blocks own other units), reduces them over the ranks in rank
// order, adds them to the fp32 residual and writes the normalised 16-bit row. Rows of up to
// 4 * 4 * kPeerArThreads = 8192 fp32 values.
template <typename T>
__global__ void __launch_bounds__(kPeerArThreads)
    peer_all_reduce_norm_kernel(PeerArArgs a, int rows, int n, float* __restrict__ residual,
                                const float* __restrict__ w, float eps, T* __restrict__ out) {
  __shared__ float red[32];
  pdl_trigger();  // as in peer_ll_norm_kernel
  const int b = blockIdx.x;
  pdl_wait();  // as in peer_ll_norm_kernel
  PeerArSignal* me = a.signal[a.rank];
  const uint32_t flag = me->counter[b] + 1;
  const int k = int(flag & 1u);
  const int upr = n / 4;  // 16-byte units per row
  const uint4* x = static_cast<const uint4*>(a.x);
  uint4* mine = static_cast<uint4*>(a.staging[a.rank][k]);
  for (int r = b; r < rows; r += gridDim.x)
    for (int i = threadIdx.x; i < upr; i += kPeerArThreads) mine[size_t(r) * upr + i] = x[size_t(r) * upr + i];
  peer_barrier(a, b, flag);
  for (int r = b; r < rows; r += gridDim.x) {
    float v[16];
    float ss = 0.f;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int i = c * kPeerArThreads + threadIdx.x;
      if (i >= upr) break;
      float acc[4] = {};
      for (int p = 0; p < a.size; ++p)
        add_unit<float>(__ldcv(static_cast<const uint4*>(a.staging[p][k]) + size_t(r) * upr + i), acc);
      float4* rp = reinterpret_cast<float4*>(residual + size_t(r) * n) + i;
      float4 q = *rp;
      q.x += acc[0], q.y += acc[1], q.z += acc[2], q.w += acc[3];
      *rp = q;
      v[c * 4 + 0] = q.x, v[c * 4 + 1] = q.y, v[c * 4 + 2] = q.z, v[c * 4 + 3] = q.w;
      ss += q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w;
    }
    const float inv = rsqrtf(block_sum(ss, red) / float(n) + eps);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int i = c * kPeerArThreads + threadIdx.x;
      if (i >= upr) break;
      T* o = out + size_t(r) * n + size_t(i) * 4;
#pragma unroll
      for (int j = 0; j < 4; ++j) o[j] = from_f<T>(v[c * 4 + j] * inv * w[i * 4 + j]);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) me->counter[b] = flag;
}

// Low-latency channel (NCCL's "LL" protocol): a 16-byte line carries two fp32 values, each
// beside a copy of the call number, written with one 16-byte store; a reader knows the line
// arrived when both copies match (stores are at least 8-byte atomic over NVLink). Receive buffers
// alternate by call parity: a rank writes call k + 2 only after its peers took call k + 1 from
// it, so they have finished reading call k's parity.
__device__ __forceinline__ void st_line(uint4* p, float a, float b, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(__float_as_uint(a)), "r"(flag),
               "r"(__float_as_uint(b)), "r"(flag)
               : "memory");
}

__device__ __forceinline__ uint4 ld_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ bool line_arrived(const uint4& v, uint32_t flag) { return v.y == flag && v.w == flag; }
__device__ __forceinline__ float2 line_values(const uint4& v) {
  return make_float2(__uint_as_float(v.x), __uint_as_float(v.z));
}

__device__ __forceinline__ float2 ld_line(const uint4* p, uint32_t flag) {
  uint4 v;
  do {
    v = ld_volatile(p);
  } while (!line_arrived(v, flag));
  return line_values(v);
}

// A thread's lines i = threadIdx.x + c * kPeerArThreads (c < kLines, i < lines) of one source, all
// requested at once per try: one L2 round trip once the lines have arrived, where polling them one
// after another (ld_line) pays one round trip per line.
// (In groups of 4 lines, which bounds the registers in flight: a row of 8192 values is 8 lines a
// thread, two round trips.)
template <int kLines>
__device__ __forceinline__ void ld_lines(const uint4* src, int lines, uint32_t flag, float2 (&q)[kLines]) {
  constexpr int kGroup = kLines < 4 ? kLines : 4;
#pragma unroll
  for (int c0 = 0; c0 < kLines; c0 += kGroup) {
    uint32_t pending = 0;
#pragma unroll
    for (int c = 0; c < kGroup; ++c)
      if ((c0 + c) * kPeerArThreads + int(threadIdx.x) < lines) pending |= 1u << c;
    while (pending) {
      uint4 v[kGroup];
#pragma unroll
      for (int c = 0; c < kGroup; ++c)
        if (pending & (1u << c)) v[c] = ld_volatile(src + (c0 + c) * kPeerArThreads + threadIdx.x);
#pragma unroll
      for (int c = 0; c < kGroup; ++c)
        if ((pending & (1u << c)) && line_arrived(v[c], flag)) {
          q[c0 + c] = line_values(v[c]);
          pending &= ~(1u << c);
        }
    }
  }
}

// Block b owns the rows r with r % gridDim.x == b, as peer_all_reduce_norm_kernel; a thread owns
// lines i = threadIdx.x + c * kPeerArThreads of a row (values 2i, 2i + 1). The sum is taken in
// rank order on every rank, so all ranks hold the same bits. kBatchPoll: a source's lines are
// polled together (ld_lines), else one by one (CudaTuning::peer_ll_batch_poll).
template <typename T, bool kBatchPoll = false>
__global__ void __launch_bounds__(kPeerArThreads)
    peer_ll_norm_kernel(PeerLLArgs a, const float* x, int rows, int n, float* __restrict__ residual,
                        const float* __restrict__ w, float eps, T* __restrict__ out) {
  __shared__ float red[32];
  constexpr int kLines = 8192 / 2 / kPeerArThreads;  // lines a thread owns at most
  // The next projection's GEMV (PDL) may start fetching its weights while this waits for peers.
  pdl_trigger();
  const int b = blockIdx.x;
  const int lines = n / 2;
  // Before the wait, so that no DRAM trip is left on the path after it: the norm weights (no
  // kernel writes them) into registers, the call counter and this block's residual rows into L2
  // (l2_prefetch: coherent with the writes still to come).
  float2 wv[kLines];
#pragma unroll
  for (int c = 0; c < kLines; ++c) {
    const int i = c * kPeerArThreads + threadIdx.x;
    if (i < lines) wv[c] = reinterpret_cast<const float2*>(w)[i];
  }
  if (threadIdx.x == 0) l2_prefetch(a.counter + b);
  for (int r = b; r < rows; r += gridDim.x)
    for (int i = threadIdx.x * 32; i < n; i += kPeerArThreads * 32) l2_prefetch(residual + size_t(r) * n + i);
  // Launched with PDL: the projection's partial sums (x) are complete only after the wait, and so
  // is the previous call's counter update (a PDL chain may start this call while that one runs).
  pdl_wait();
  const uint32_t flag = a.counter[b] + 1;
  const int64_t slab = a.cap_lines;  // lines of one (parity, source)
  const int64_t par = int64_t(flag & 1u) * a.size * slab;
  for (int r = b; r < rows; r += gridDim.x) {
    // The residual's loads are issued with x's, before the push: they return during the NVLink trip.
    float2 v[kLines], res[kLines];
#pragma unroll
    for (int c = 0; c < kLines; ++c) {
      const int i = c * kPeerArThreads + threadIdx.x;
      if (i < lines) {
        v[c] = reinterpret_cast<const float2*>(x + size_t(r) * n)[i];
        res[c] = reinterpret_cast<const float2*>(residual + size_t(r) * n)[i];
      }
    }
    const int64_t at = int64_t(r) * lines;
    for (int p = 0; p < a.size; ++p) {
      if (p == a.rank) continue;
      uint4* dst = static_cast<uint4*>(a.recv[p]) + par + int64_t(a.rank) * slab + at;
#pragma unroll
      for (int c = 0; c < kLines; ++c) {
        const int i = c * kPeerArThreads + threadIdx.x;
        if (i < lines) st_line(dst + i, v[c].x, v[c].y, flag);
      }
    }
    float2 acc[kLines];
#pragma unroll
    for (int c = 0; c < kLines; ++c) acc[c] = make_float2(0.f, 0.f);
    for (int p = 0; p < a.size; ++p) {
      const uint4* src = static_cast<const uint4*>(a.recv[a.rank]) + par + int64_t(p) * slab + at;
      if constexpr (kBatchPoll) {
        float2 q[kLines];
        if (p == a.rank) {
#pragma unroll
          for (int c = 0; c < kLines; ++c) q[c] = v[c];
        } else {
          ld_lines<kLines>(src, lines, flag, q);
        }
#pragma unroll
        for (int c = 0; c < kLines; ++c)
          if (c * kPeerArThreads + int(threadIdx.x) < lines) acc[c].x += q[c].x, acc[c].y += q[c].y;
      } else {
#pragma unroll
        for (int c = 0; c < kLines; ++c) {
          const int i = c * kPeerArThreads + threadIdx.x;
          if (i >= lines) continue;
          const float2 q = p == a.rank ? v[c] : ld_line(src + i, flag);
          acc[c].x += q.x, acc[c].y += q.y;
        }
      }
    }
    float ss = 0.f;
#pragma unroll
    for (int c = 0; c < kLines; ++c) {
      const int i = c * kPeerArThreads + threadIdx.x;
      if (i >= lines) continue;
      float2 q = res[c];
      q.x += acc[c].x, q.y += acc[c].y;
      reinterpret_cast<float2*>(residual + size_t(r) * n)[i] = q;
      acc[c] = q;
      ss += q.x * q.x + q.y * q.y;
    }
    const float inv = rsqrtf(block_sum(ss, red) / float(n) + eps);
#pragma unroll
    for (int c = 0; c < kLines; ++c) {
      const int i = c * kPeerArThreads + threadIdx.x;
      if (i >= lines) continue;
      T* o = out + size_t(r) * n + 2 * i;
      o[0] = from_f<T>(acc[c].x * inv * wv[c].x);
      o[1] = from_f<T>(acc[c].y * inv * wv[c].y);
    }
  }
  if (threadIdx.x == 0) a.counter[b] = flag;
}

}  // namespace

cudaError_t peer_ll_all_reduce_add_rms_norm(const PeerLLArgs& a, Act act, const float* x, int rows, int n,
                                            float* residual, const float* w, float eps, void* out, cudaStream_t s,
                                            bool pdl, bool batch_poll) {
  if (rows == 0) return cudaSuccess;
  if (a.size < 1 || a.size > kPeerArMaxRanks || n % 2 != 0 || n > 8192 || int64_t(rows) * n / 2 > a.cap_lines)
    return cudaErrorInvalidValue;
  auto go = [&](auto kernel, auto* o) {
    return launch_pdl(pdl, kernel, dim3(kPeerArBlocks), dim3(kPeerArThreads), 0, s, a, x, rows, n, residual, w, eps, o);
  };
  if (act == Act::BF16) {
    auto* o = static_cast<__nv_bfloat16*>(out);
    return batch_poll ? go(peer_ll_norm_kernel<__nv_bfloat16, true>, o) : go(peer_ll_norm_kernel<__nv_bfloat16>, o);
  }
  auto* o = static_cast<__half*>(out);
  return batch_poll ? go(peer_ll_norm_kernel<__half, true>, o) : go(peer_ll_norm_kernel<__half>, o);
}

cudaError_t peer_all_reduce_add_rms_norm(const PeerArArgs& a, Act act, int rows, int n, float* residual,
                                         const float* w, float eps, void* out, cudaStream_t s, bool pdl) {
  if (rows == 0) return cudaSuccess;
  if (a.size < 1 || a.size > kPeerArMaxRanks || n % 4 != 0 || n > 16 * kPeerArThreads) return cudaErrorInvalidValue;
  if (act == Act::BF16)
    return launch_pdl(pdl, peer_all_reduce_norm_kernel<__nv_bfloat16>, dim3(kPeerArBlocks), dim3(kPeerArThreads), 0,
                      s, a, rows, n, residual, w, eps, static_cast<__nv_bfloat16*>(out));
  return launch_pdl(pdl, peer_all_reduce_norm_kernel<__half>, dim3(kPeerArBlocks), dim3(kPeerArThreads), 0, s, a,
                    rows, n, residual, w, eps, static_cast<__half*>(out));
}

cudaError_t peer_all_reduce(const PeerArArgs& a, int elem_kind, cudaStream_t s) {
  if (a.units == 0) return cudaSuccess;
  if (a.size < 1 || a.size > kPeerArMaxRanks) return cudaErrorInvalidValue;
  if (elem_kind == 0)
    peer_all_reduce_kernel<float><<<kPeerArBlocks, kPeerArThreads, 0, s>>>(a);
  else if (elem_kind == 1)
    peer_all_reduce_kernel<__half><<<kPeerArBlocks, kPeerArThreads, 0, s>>>(a);
  else
    peer_all_reduce_kernel<__nv_bfloat16><<<kPeerArBlocks, kPeerArThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace lite_llama::cuda
