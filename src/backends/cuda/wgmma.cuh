// Warpgroup-level tensor-core primitives of sm_90a (wgmma): 128 threads (four warps) compute a
// 64 x N tile with fp32 accumulators, A from shared memory (descriptor) or registers, B from
// shared memory. Only compiled where __CUDA_ARCH_FEAT_SM90_ALL is defined (-arch sm_90a).
//
// Accumulator layout of m64nNk16 (thread 32 w + 4 g + t of the warpgroup): d[4 i + 0..1] = row
// 16 w + g, cols 8 i + 2 t + 0..1; d[4 i + 2..3] = row 16 w + g + 8, same cols. The A fragment
// from registers is mma.m16n8k16's A fragment of the warp's 16 rows (mma.cuh).
//
// Shared-memory operands here use the 128-byte swizzle: a tile is stored as blocks of 64
// 16-bit columns (128-byte rows), block c of a tile of R rows at c * R * 128 bytes, and the 16-byte
// chunk j of row r at r * 128 + ((j ^ (r % 8)) * 16). Tiles start 1024-byte aligned.
#pragma once
#include <cstdint>

namespace lite_llama::cuda::wg {

// Byte offset of 16-byte chunk j (0..D/8-1) of row r in a swizzled tile of R rows.
__device__ __forceinline__ uint32_t swz(int r, int j, int R) {
  return uint32_t((j >> 3) * R * 128 + r * 128 + (((j & 7) ^ (r & 7)) << 4));
}

// Matrix descriptor: start address, leading / stride byte offsets, 128-byte swizzle.
// K-major operands (rows of 64 K values): SBO = 1024 (one 8-row group to the next), LBO unused.
// MN-major operands (B of P V: rows are K, 64 N values each): SBO = 1024 (8 K rows), LBO = the
// distance between 64-wide N blocks.
__device__ __forceinline__ uint64_t desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared-memory writes of the generic proxy (cp.async, st.shared) made visible to wgmma.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#else
__device__ __forceinline__ void fence() {}
__device__ __forceinline__ void commit() {}
template <int N>
__device__ __forceinline__ void wait() {}
__device__ __forceinline__ void fence_async_smem() {}
#endif

// Keeps the compiler from moving accumulator reads or writes across an asynchronous wgmma.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R][4]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}

// The accumulator operands of the wgmma wrappers: d[0..7][4] or d[0..15][4] (8 columns each, the
// mma accumulator layout) and their "%i" names; LL_WG_D8(c, i) names d[i] and d[i + 1] with
// constraint c: "+f" accumulates, "=f" (scale-d 0: d is only written) needs no zeroed registers.
#define LL_WG_D8(c, i)                                                                         \
  c(d[i][0]), c(d[i][1]), c(d[i][2]), c(d[i][3]), c(d[(i) + 1][0]), c(d[(i) + 1][1]), c(d[(i) + 1][2]), \
      c(d[(i) + 1][3])
#define LL_WG_OUT32 LL_WG_D8("+f", 0), LL_WG_D8("+f", 2), LL_WG_D8("+f", 4), LL_WG_D8("+f", 6)
#define LL_WG_OUT64 LL_WG_OUT32, LL_WG_D8("+f", 8), LL_WG_D8("+f", 10), LL_WG_D8("+f", 12), LL_WG_D8("+f", 14)
#define LL_WG_NEW32 LL_WG_D8("=f", 0), LL_WG_D8("=f", 2), LL_WG_D8("=f", 4), LL_WG_D8("=f", 6)
#define LL_WG_NEW64 LL_WG_NEW32, LL_WG_D8("=f", 8), LL_WG_D8("=f", 10), LL_WG_D8("=f", 12), LL_WG_D8("=f", 14)
#define LL_WG_REGS32                                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define LL_WG_REGS64                                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "  \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "  \
  "%62, %63}"
// SS (TRANS "0, 0"): A and B from descriptors, B K-major; RS (TRANS "1"): A from registers, B
// MN-major. C = N / 2 accumulators take %0..%(C - 1); the operands A, B and the scale-d source
// follow (inputs LL_WG_IN_SS or LL_WG_IN_RS).
#define LL_WGMMA(N, C, TY, A, B, P, TRANS, IN, D)                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N          \
               "k16.f32." TY "." TY " " LL_WG_REGS##C ", " A ", " B ", p, 1, 1, " TRANS ";\n}\n"            \
               : LL_WG_##D##C                                                                               \
               : LL_WG_IN_##IN)
#define LL_WG_TYPED(N, C, A, B, P, TRANS, IN, D) \
  if constexpr (kBf16)                           \
    LL_WGMMA(N, C, "bf16", A, B, P, TRANS, IN, D); \
  else                                           \
    LL_WGMMA(N, C, "f16", A, B, P, TRANS, IN, D)
#define LL_WG_IN_SS "l"(a_desc), "l"(b_desc), "r"(scale_d)
#define LL_WG_IN_RS "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d)

// d (64 x N, d[n / 8]) = A (64 x 16, K-major descriptor) * B (16 x N, K-major descriptor) + (scale_d ? d : 0).
// kFirst: scale_d is 0 and d's old values are not read (nothing to zero before the first step).
template <bool kBf16, int N, bool kFirst = false>
__device__ __forceinline__ void mma_ss(float (&d)[N / 8][4], uint64_t a_desc, uint64_t b_desc, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(N == 64 || N == 128);
  if constexpr (kFirst) {
    scale_d = 0;
    if constexpr (N == 64) { LL_WG_TYPED(64, 32, "%32", "%33", "%34", "0, 0", SS, NEW); }
    else { LL_WG_TYPED(128, 64, "%64", "%65", "%66", "0, 0", SS, NEW); }
  } else {
    if constexpr (N == 64) { LL_WG_TYPED(64, 32, "%32", "%33", "%34", "0, 0", SS, OUT); }
    else { LL_WG_TYPED(128, 64, "%64", "%65", "%66", "0, 0", SS, OUT); }
  }
#endif
}

// d (64 x N, d[n / 8]) = A (64 x 16, registers) * B (16 x N, MN-major descriptor) + (scale_d ? d : 0).
template <bool kBf16, int N>
__device__ __forceinline__ void mma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b_desc, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(N == 64 || N == 128);
  if constexpr (N == 64) { LL_WG_TYPED(64, 32, "{%32, %33, %34, %35}", "%36", "%37", "1", RS, OUT); }
  else { LL_WG_TYPED(128, 64, "{%64, %65, %66, %67}", "%68", "%69", "1", RS, OUT); }
#endif
}

#undef LL_WGMMA
#undef LL_WG_TYPED
#undef LL_WG_IN_SS
#undef LL_WG_IN_RS
#undef LL_WG_D8
#undef LL_WG_OUT32
#undef LL_WG_OUT64
#undef LL_WG_NEW32
#undef LL_WG_NEW64
#undef LL_WG_REGS32
#undef LL_WG_REGS64

}  // namespace lite_llama::cuda::wg
