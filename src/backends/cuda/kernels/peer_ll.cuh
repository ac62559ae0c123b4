// The low-latency channel's line (NCCL's "LL" protocol), shared by the fused all-reduce + norm
// (allreduce.cu) and the row-parallel GEMV that pushes its output rows into it (gemv.cu): a
// 16-byte line carries two fp32 values, each beside a copy of the call number, written with one
// 16-byte store; a reader knows the line arrived when both copies match (stores are at least
// 8-byte atomic over NVLink).
#pragma once
#include <cstdint>

#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {

__device__ __forceinline__ void st_line(uint4* p, float a, float b, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(__float_as_uint(a)), "r"(flag),
               "r"(__float_as_uint(b)), "r"(flag)
               : "memory");
}

__device__ __forceinline__ float2 ld_line(const uint4* p, uint32_t flag) {
  uint4 v;
  do {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
                 : "memory");
  } while (v.y != flag || v.w != flag);
  return make_float2(__uint_as_float(v.x), __uint_as_float(v.z));
}

// Row r of a call is owned by block r % kPeerArBlocks of the norm kernel, whose counter numbers
// the calls; its lines go to recv[peer] + parity slab + this rank's slab + r * lines.
__device__ __forceinline__ uint32_t ll_flag(const PeerLLArgs& a, int row) { return a.counter[row % kPeerArBlocks] + 1; }
__device__ __forceinline__ uint4* ll_dst(const PeerLLArgs& a, int peer, int source, uint32_t flag, int64_t line) {
  return static_cast<uint4*>(a.recv[peer]) + int64_t(flag & 1u) * a.size * a.cap_lines + int64_t(source) * a.cap_lines +
         line;
}

}  // namespace lite_llama::cuda
