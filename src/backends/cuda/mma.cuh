// Warp-level tensor-core and async-copy primitives (sm_80+): mma.sync m16n8k16 with fp32
// accumulators, ldmatrix fragment loads, cp.async into shared memory.
// Fragment layout of m16n8k16 (lane = 4 g + t): A a0 (row g, cols 2t..2t+1), a1 (row g + 8),
// a2 (row g, cols 2t + 8..), a3 (row g + 8, cols 2t + 8..); B b0 (k 2t..2t+1, col g), b1 (k 2t + 8..);
// C c0 c1 (row g, cols 2t, 2t + 1), c2 c3 (row g + 8).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace lite_llama::cuda {

// Two floats as the 16-bit pair an mma operand register holds (low half first).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    memcpy(&r, &h, 4);
  } else {
    const __half2 h = __floats2half2_rn(a, b);
    memcpy(&r, &h, 4);
  }
  return r;
}

// c += a (16 x 16, row) * b (16 x 8, col), fp32 accumulate; TY: "bf16" or "f16".
#define LL_MMA16816(TY)                                                                                 \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
      "{%0,%1,%2,%3};"                                                                                  \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                  \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) LL_MMA16816("bf16");
  else LL_MMA16816("f16");
}
#undef LL_MMA16816

// Four 8 x 8 16-bit matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i
// receives it (lane 4g + t: row g, elements 2t..2t+1; .trans: rows 2t..2t+1 of column g).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  const unsigned a = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const unsigned a = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// 16 bytes global -> shared, bypassing L1; !ok writes zeros (src is not read).
__device__ __forceinline__ void cp_async16(void* smem, const void* src, bool ok) {
  const unsigned dst = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}
// 16 bytes from global address src to shared address dst, or zeros where skip < 0 (src is then
// not read). Shared and global addresses as integers: no generic-to-shared conversion per copy.
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, uint64_t src, int skip) {
  asm volatile(
      "{\n .reg .pred p;\n setp.lt.s32 p, %2, 0;\n cp.async.cg.shared.global [%0], [%1], 16, p;\n}\n" ::"r"(dst),
      "l"(src), "r"(skip));
}
// a * b + c in one wide multiply-add (a and b 32-bit, c 64-bit).
__device__ __forceinline__ uint64_t mad_wide(uint32_t a, uint32_t b, uint64_t c) {
  uint64_t d;
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(d) : "r"(a), "r"(b), "l"(c));
  return d;
}
__device__ __forceinline__ void cp_async4(void* smem, const void* src, bool ok) {
  const unsigned dst = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

}  // namespace lite_llama::cuda
