// Decode-sized mixture-of-experts projections: no sort and no slot table. Block (x, y) takes the
// y-th expert present in t_expert, gathers that expert's assignments, stages up to kChunk of
// their activations in shared memory and applies its row groups (kRowsPerBlock rows each) to
// them, so a step reads each active expert's rows once per kChunk assignments and inactive
// experts not at all.
// Weights are 16-bit or GQ int8 / fp8 / int4 rows (moe_internal.cuh), the latter dequantised in
// registers; the activations and the fp32 accumulation are the same for all.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/moe_internal.cuh"
#include "backends/cuda/func_attr.h"
#include "backends/cuda/launchers.h"
#include "backends/cuda/mma.cuh"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda::moe {
namespace {

constexpr int kWarps = 8;
// Rows per warp: for GQ rows 2 in steps of up to kFewAssign assignments (twice the blocks, so
// more weight bytes in flight while each block's prologue waits), 4 above (the prologue and the
// staged activations serve twice the rows); for 16-bit rows 4 always (H100, Qwen3-30B-A3B under
// PDL: batch 1 1.4% faster than 2). Steps of up to kFewAssign assignments fetch the first
// l2_prefetch bytes of each row into L2 during the prologue, larger ones none (H100, 16-bit:
// 2.5% faster at batch 1 with 1 KiB than without, 0.8% slower at batch 64). Larger steps may
// give a block row_groups row groups of its expert after one prologue (moe_gemv_row_groups;
// fetching the next group's first 1 KiB a row into L2 while one computes was 2% slower at batch
// 64 on an H100, so there is none).
constexpr int kFewAssign = 16;
constexpr int kChunk = 8;  // assignments per pass over the rows
constexpr int kPresentWords = kMoeMaxExperts / 32;

// A lane's weights of one round of a 32-row group of expert e on mma.sync: chunks ch0, ch0 + 4,
// ..., ch0 + 4 (kU - 1) of rows g0 + 16 (warp & 1) + lane / 4 (a) and 8 further (b), 16 bytes of
// each at column 8 (lane & 3) of the chunk; zeros past K or N.
template <int kU>
struct MmaLoads {
  uint4 a[kU], b[kU];
  __device__ __forceinline__ void load(const Rows& W, int e, int N, int K, int g0, int ch0) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int ra = g0 + (warp & 1) * 16 + (lane >> 2), rb = ra + 8, tq = lane & 3;
    const bool oka = ra < N, okb = rb < N;
    const uint8_t* wa = W.data + (size_t(e) * N + (oka ? ra : 0)) * W.row_bytes;
    const uint8_t* wb = W.data + (size_t(e) * N + (okb ? rb : 0)) * W.row_bytes;
    const int nch = (K + 31) / 32;
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int k = (ch0 + 4 * u) * 32 + 8 * tq;
      const bool in = ch0 + 4 * u < nch && k < K;
      a[u] = in && oka ? ld_stream(wa + size_t(k) * 2) : zero;
      b[u] = in && okb ? ld_stream(wb + size_t(k) * 2) : zero;
    }
  }
};

// One 32-row group of expert e applied to the m (<= kChunk) staged activations xs (row stride
// ldx) on mma.sync (see gemv_kernel's kMma), kU chunks in flight a lane (2 x 16 bytes of weights
// each); out[list[t] * N + row]. Called by every thread. loaded: q already holds the group's
// first round; next_g0 >= 0: q is left holding row group next_g0's first round, requested before
// the warps' sums are combined.
template <typename T, typename O, int kU>
__device__ __forceinline__ void mma_group(const Rows& W, int e, int N, int K, const T* xs, int ldx, int g0, int m,
                                          const int* list, O* __restrict__ out, MmaLoads<kU>& q, bool loaded,
                                          int next_g0) {
  __shared__ float part[2][4][16][8];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp & 1, wk = warp >> 1, g = lane >> 2, tq = lane & 3;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  const int nch = (K + 31) / 32;
  for (int ch0 = wk; ch0 < nch; ch0 += 4 * kU) {
    if (!loaded || ch0 != wk) q.load(W, e, N, K, g0, ch0);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int k = (ch0 + 4 * u) * 32 + 8 * tq;
      // Out of range (past K, or a token past m): zeros on both sides, never 0 x garbage.
      const bool in = ch0 + 4 * u < nch && k < K;
      const uint4 xb = in && g < m ? *reinterpret_cast<const uint4*>(xs + size_t(g) * ldx + k) : zero;
      const uint4 a = in ? q.a[u] : zero, b = in ? q.b[u] : zero;
      const uint32_t f0[4] = {a.x, b.x, a.y, b.y}, f1[4] = {a.z, b.z, a.w, b.w};
      mma16816<T>(c, f0, xb.x, xb.y);
      mma16816<T>(c, f1, xb.z, xb.w);
    }
  }
  if (next_g0 >= 0) q.load(W, e, N, K, next_g0, wk);  // in flight while the sums meet
  part[wm][wk][g][2 * tq] = c[0], part[wm][wk][g][2 * tq + 1] = c[1];
  part[wm][wk][g + 8][2 * tq] = c[2], part[wm][wk][g + 8][2 * tq + 1] = c[3];
  __syncthreads();
  {  // thread i: row (i >> 3) of the group, token i & 7
    const int i = threadIdx.x, t = i & 7, r16 = (i >> 3) & 15, tm = i >> 7, row = g0 + tm * 16 + r16;
    if (t < m && row < N) {
      const float v = ((part[tm][0][r16][t] + part[tm][1][r16][t]) + part[tm][2][r16][t]) + part[tm][3][r16][t];
      out[size_t(list[t]) * N + row] = from_f<O>(v);
    }
  }
  __syncthreads();  // part is rewritten by the next group
}

// A lane reads 16 bytes of codes of each of its rows per step whatever the KIND (8, 16 or 32
// weights), and for GQ rows the (s, m) word of their group.
// Two blocks an SM: without the bound ptxas (CUDA 13) spilled a few registers in the
// 2-row variants while using fewer than 128.
// Under programmatic dependent launch the gate|up product (!kSwiglu) waits before it reads the
// routing; the down product (kSwiglu), launched while the gate|up one still runs, reads the
// routing (complete: the gate|up blocks let it start only after their own wait), finds its
// expert and prefetches its rows, and waits only before it stages the gate|up products.
// A block takes row groups (kRowsPerBlock rows each) blockIdx.x, blockIdx.x + gridDim.x, ... of
// its expert after one prologue: strided rather than a contiguous range, so that the blocks of an
// expert that run at once read neighbouring row groups (one window sweeping the expert's rows)
// and, where gridDim.x does not divide the groups, hold at most one group more than another.
// When all of the expert's assignments fit one kChunk pass, xs is staged once for all of them
// and the row groups run without a barrier; else each pass is staged per row group, as with
// one group a block. prefetch_pieces: 512-byte pieces of each row of the first group fetched
// into L2 during the prologue.
// kMma > 0 (16-bit rows): the products run on mma.sync m16n8k16 instead of FMAs. Warp w takes 16
// rows (w & 1) and a quarter of K (w >> 1) in 32-weight chunks, a lane loading 16 bytes of two
// rows (g, g + 8) and of one staged activation row (g): the 32 weights of a chunk are applied in a
// permuted order (lane t's 8 consecutive weights are columns 2t, 2t + 1, 2t + 8, 2t + 9 of two
// m16n8k16 steps), the same for both operands. The warps' partial sums meet in shared memory in
// a fixed order. A few instructions a KiB of weights instead of ~100 for the FMA loop. kMma
// chunks are in flight a lane: 8 where a warp's quarter of K has at most 8 (the down product's K
// 768: one round trip for all of a warp's weights), else 4 (fewer registers: three blocks an SM).
// kPreload (kMma): the block's first weights are requested as soon as its expert is known (for
// the down product before its PDL wait), and with its assignments staged once the next row
// group's before the current one's sums meet (CudaTuning::moe_gemv_preload).
template <typename T, int KIND, typename O, bool kSwiglu, int kRows, int kMma = 0, bool kPreload = false>
__global__ void __launch_bounds__(kWarps * 32, 2)
    gemv_kernel(Rows W, int N, int K, const T* __restrict__ in, int top_k,
                const int32_t* __restrict__ t_expert, int n, O* __restrict__ out, int prefetch_pieces) {
  constexpr int kRowsPerBlock = kWarps * kRows;
  static_assert(!kMma || (KIND == k16Bit && kRowsPerBlock == 32), "the mma variant: 16-bit rows, 32 a group");
  static_assert(!kPreload || kMma, "preload: the mma variant");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* xs = reinterpret_cast<T*>(smem_raw);  // [kChunk][ldx]
  const int ldx = kMma ? K + 8 : K;        // kMma: rows padded by 16 bytes (fewer bank conflicts)
  __shared__ unsigned present[kPresentWords];
  __shared__ int list[kGemvMaxAssign];
  __shared__ int cnt, expert;
  const int tid = threadIdx.x;
  if constexpr (!kSwiglu) {
    pdl_wait();
    pdl_trigger();  // the down GEMV may start: every block of this one has seen the routing
  }
  // One read of t_expert: this thread's assignments tid, tid + 256, ... stay in registers. (The
  // down GEMV reads it before its wait: the routing completed before this grid was launched.)
  constexpr int kPer = kGemvMaxAssign / (kWarps * 32);
  int mine[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int a = tid + i * kWarps * 32;
    mine[i] = a < n ? t_expert[a] : -1;
  }
  if (tid < kPresentWords) present[tid] = 0;
  if (tid == 0) cnt = 0;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (mine[i] >= 0) atomicOr(&present[mine[i] >> 5], 1u << (mine[i] & 31));
  __syncthreads();
  if (tid == 0) {  // the blockIdx.y-th expert present, or -1
    int want = int(blockIdx.y), e = -1;
    for (int w = 0; w < kPresentWords && e < 0; ++w) {
      unsigned m = present[w];
      const int c = __popc(m);
      if (want < c) {
        for (int i = 0; i < want; ++i) m &= m - 1;
        e = w * 32 + __ffs(int(m)) - 1;
      }
      want -= c;
    }
    expert = e;
  }
  __syncthreads();
  const int e = expert;
  if (e < 0) return;
  const int warp = tid >> 5, lane = tid & 31;
  constexpr int kCols = kLoadCols<KIND>;
  const size_t rb = W.row_bytes, cb = code_bytes<KIND>(K);
  // The first `pieces` 512-byte pieces of this warp's rows of the row group from row g0, into L2
  // (one lane per 128-byte line).
  auto prefetch = [&](int g0, int pieces) {
    const int r0 = g0 + warp * kRows;
    if (r0 < N && (lane & 7) == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* row = W.data + (size_t(e) * N + r0 + r) * rb;
        for (int u = 0; u < pieces; ++u)
          if (r0 + r < N && size_t(lane * 16 + u * 512) < cb)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(row + lane * 16 + u * 512));
      }
    }
  };
  prefetch(int(blockIdx.x) * kRowsPerBlock, prefetch_pieces);  // while the assignments are gathered
  // preload: the first group's first round of weights in flight from here (no kernel writes them).
  MmaLoads<kMma ? kMma : 1> q;
  bool loaded = false;
  if constexpr (kPreload)
    if (int(blockIdx.x) * kRowsPerBlock < N) {
      q.load(W, e, N, K, int(blockIdx.x) * kRowsPerBlock, warp >> 1);
      loaded = true;
    }
  // The order within the list does not matter: each output depends on its own assignment only.
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    if (mine[i] == e) list[atomicAdd(&cnt, 1)] = tid + i * kWarps * 32;
  if constexpr (kSwiglu) {
    pdl_wait();     // the gate|up products are complete only now
    pdl_trigger();  // the combine may start
  }
  __syncthreads();
  const int total = cnt;
  const int vecs = K / 8;
  // xs[0 .. m) = the activations of assignments list[c0 .. c0 + m).
  auto stage = [&](int c0, int m) {
    for (int i = tid; i < m * vecs; i += blockDim.x) {
      const int t = i / vecs, v = i - t * vecs, a = list[c0 + t];
      uint4 val;
      if constexpr (kSwiglu) {
        const T* g = in + size_t(a) * 2 * K + size_t(v) * 8;
        float gf[8], uf[8], of[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(g), gf);
        unpack8<T>(*reinterpret_cast<const uint4*>(g + K), uf);
#pragma unroll
        for (int j = 0; j < 8; ++j) of[j] = gf[j] / (1.0f + __expf(-gf[j])) * uf[j];
        val = pack8<T>(of);
      } else {
        val = *reinterpret_cast<const uint4*>(in + size_t(a / top_k) * K + size_t(v) * 8);
      }
      *reinterpret_cast<uint4*>(xs + size_t(t) * ldx + size_t(v) * 8) = val;
    }
  };
  const bool once = total <= kChunk;  // xs holds every assignment: staged once for all groups
  if (once) {
    stage(0, total);
    __syncthreads();
  }
  // g0: the row group's first row (row groups blockIdx.x, blockIdx.x + gridDim.x, ...).
  for (int g0 = int(blockIdx.x) * kRowsPerBlock; g0 < N; g0 += int(gridDim.x) * kRowsPerBlock) {
    const int r0 = g0 + warp * kRows;  // this warp's first row
    for (int c0 = 0; c0 < total; c0 += kChunk) {
      const int m = min(kChunk, total - c0);
      if (!once) {
        stage(c0, m);
        __syncthreads();
      }
      if constexpr (kMma) {
        // With every assignment staged once, the next group follows this one directly: request it.
        const int next = g0 + int(gridDim.x) * kRowsPerBlock;
        const int next_g0 = kPreload && once && next < N ? next : -1;
        mma_group<T, O, kMma>(W, e, N, K, xs, ldx, g0, m, list + c0, out, q, loaded && c0 == 0, next_g0);
        loaded = next_g0 >= 0;
      } else if (r0 < N) {
        const uint8_t* w = W.data + (size_t(e) * N + r0) * rb;
        float acc[kRows][kChunk] = {};
#pragma unroll 2
        for (int kk = lane * kCols; kk < K; kk += 32 * kCols) {
          // Rows past N read zero codes and params: weight 0, and their sums are not written.
          uint4 q[kRows];
          Params p[kRows] = {};
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const bool ok = r0 + r < N;
            const uint8_t* row = w + size_t(r) * rb;
            q[r] = ok ? ld_stream(row + code_bytes<KIND>(kk)) : make_uint4(0, 0, 0, 0);
            if constexpr (KIND != k16Bit)
              p[r] = prep_params<T, KIND>(
                  ok ? __ldg(reinterpret_cast<const uint32_t*>(row + cb) + (kk >> W.gshift)) : 0u);
          }
#pragma unroll
          for (int h = 0; h < kCols / 8; ++h) {
            float wv[kRows][8];
#pragma unroll
            for (int r = 0; r < kRows; ++r) dequant8<T, KIND>(q[r], h, p[r], wv[r]);
#pragma unroll
            for (int t = 0; t < kChunk; ++t) {
              if (t >= m) break;
              float xv[8];
              unpack8<T>(*reinterpret_cast<const uint4*>(xs + size_t(t) * K + kk + 8 * h), xv);
#pragma unroll
              for (int r = 0; r < kRows; ++r)
#pragma unroll
                for (int i = 0; i < 8; ++i) acc[r][t] += wv[r][i] * xv[i];
            }
          }
        }
#pragma unroll
        for (int t = 0; t < kChunk; ++t) {
          if (t >= m) break;
          const size_t a = size_t(list[c0 + t]);
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const float v = warp_sum(acc[r][t]);
            if (lane == r && r0 + r < N) out[a * N + r0 + r] = from_f<O>(v);
          }
        }
      }
      if (!once) __syncthreads();  // xs is restaged for the next pass
    }
  }
}

}  // namespace

template <typename T, int KIND, typename O>
cudaError_t gemv(const Rows& W, int N, int K, const T* in, bool swiglu, int top_k, const int32_t* t_expert, int n,
                 int experts, O* out, cudaStream_t s, const MoeGemvTuning& tune) {
  if (n > kGemvMaxAssign || K % (KIND == k16Bit ? 8 : 32) != 0) return cudaErrorInvalidValue;
  const bool few = n <= kFewAssign;
  // preload in steps of up to kFewAssign assignments only (H200, Qwen3-30B-A3B batch 64: 1.8%
  // slower with it).
  const bool mma = tune.mma && KIND == k16Bit, preload = mma && tune.preload && few;
  // A block stages <= n rows (mma: padded by 8 values).
  const size_t smem = size_t(std::min(kChunk, n)) * size_t(K + (mma ? 8 : 0)) * sizeof(T);
  const int per_block = std::max(1, few ? tune.few_row_groups : tune.row_groups);
  const int pieces = int(ceil_div(tune.l2_prefetch, 512));
  auto launch = [&](auto kernel, int rows_per_block) {
    if (smem > 48 * 1024)
      if (cudaError_t e = set_func_attr(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
          e != cudaSuccess)
        return e;
    const dim3 grid(ceil_div(long(ceil_div(N, rows_per_block)), per_block), unsigned(std::min(n, experts)));
    return launch_pdl(tune.pdl, kernel, grid, dim3(kWarps * 32), smem, s, W, N, K, in, top_k, t_expert, n, out,
                      few ? pieces : 0);
  };
  if constexpr (KIND == k16Bit)
    if (mma) {
      auto by_swiglu = [&](auto kU, auto pre) {
        constexpr int u = decltype(kU)::value;
        constexpr bool p = decltype(pre)::value;
        return swiglu ? launch(gemv_kernel<T, KIND, O, true, 4, u, p>, kWarps * 4)
                      : launch(gemv_kernel<T, KIND, O, false, 4, u, p>, kWarps * 4);
      };
      using U8 = std::integral_constant<int, 8>;
      using U4 = std::integral_constant<int, 4>;
      // preload only with 8 chunks in flight: with 4 the kernel needs 128 registers instead of 70
      // (two blocks an SM instead of three) and spills.
      if (K <= 4 * 32 * 8) return preload ? by_swiglu(U8{}, std::true_type{}) : by_swiglu(U8{}, std::false_type{});
      return by_swiglu(U4{}, std::false_type{});
    }
  if constexpr (KIND != k16Bit)
    if (few)
      return swiglu ? launch(gemv_kernel<T, KIND, O, true, 2>, kWarps * 2)
                    : launch(gemv_kernel<T, KIND, O, false, 2>, kWarps * 2);
  return swiglu ? launch(gemv_kernel<T, KIND, O, true, 4>, kWarps * 4)
                : launch(gemv_kernel<T, KIND, O, false, 4>, kWarps * 4);
}

// The gate|up product writes T, the down product (SwiGLU input) fp32 partials for the combine.
#define LL_MOE_GEMV(T, KIND, O) \
  template cudaError_t gemv<T, KIND, O>(const Rows&, int, int, const T*, bool, int, const int32_t*, int, int, O*, \
                                        cudaStream_t, const MoeGemvTuning&);
#define LL_MOE_GEMV_KINDS(T)       \
  LL_MOE_GEMV(T, k16Bit, T)        \
  LL_MOE_GEMV(T, k16Bit, float)    \
  LL_MOE_GEMV(T, kInt8, T)         \
  LL_MOE_GEMV(T, kInt8, float)     \
  LL_MOE_GEMV(T, kInt4, T)         \
  LL_MOE_GEMV(T, kInt4, float)     \
  LL_MOE_GEMV(T, kFp8, T)          \
  LL_MOE_GEMV(T, kFp8, float)
LL_MOE_GEMV_KINDS(__half)
LL_MOE_GEMV_KINDS(__nv_bfloat16)
#undef LL_MOE_GEMV_KINDS
#undef LL_MOE_GEMV

}  // namespace lite_llama::cuda::moe
