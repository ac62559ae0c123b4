// Prefill-sized mixture-of-experts projections on tensor cores: one launch for all experts. The
// assignments are sorted by expert (moe.cu); each block takes one tile of up to kTileM slots of
// one expert and kTileN of its weight rows, gathers the slots' activation rows and the weight
// rows through a 3-stage cp.async ring and multiplies them with mma.sync m16n8k16 (fp32
// accumulators). Four warps, each 32 slots x 32 rows.
//
// Int8 expert rows (--quantize int8) are dequantised in shared memory before the mma: their codes
// come through the same ring (half the bytes), and after each stage lands every thread turns the
// 16 codes it copied into 16-bit weights of one tile buffer (row scale applied, as gq_mma.cu
// dequantises dense rows), which the warps' ldmatrix then reads as in the 16-bit case.
#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/moe_internal.cuh"
#include "backends/cuda/mma.cuh"

namespace lite_llama::cuda::moe {
namespace {

constexpr int kBK = 32, kStages = 3;
constexpr int kLd = kBK + 8;  // padded row: ldmatrix rows 80 bytes apart hit distinct banks
constexpr int kThreads = 128;

template <typename T, typename WT, typename O>
__global__ void __launch_bounds__(kThreads)
    gemm_kernel(const WT* __restrict__ W, int N, int K, const T* __restrict__ in, const int32_t* __restrict__ order,
                int top_k, const int32_t* __restrict__ tiles, const int32_t* __restrict__ n_tiles,
                const int32_t* __restrict__ start, O* __restrict__ out) {
  constexpr bool kQ = kInt8Rows<WT>;
  const int tile = blockIdx.x;
  if (tile >= *n_tiles) return;
  const int e = tiles[2 * tile], s0 = tiles[2 * tile + 1];
  const int s1 = min(s0 + kTileM, start[e + 1]);
  const int n0 = int(blockIdx.y) * kTileN;
  __shared__ __align__(16) T As[kStages][kTileM][kLd];
  // 16-bit weights: a ring of kStages tiles. Int8: the ring holds the codes (Bq), and Bs[0] the
  // stage being multiplied, dequantised.
  __shared__ __align__(16) T Bs[kQ ? 1 : kStages][kTileN][kLd];
  __shared__ __align__(16) uint8_t Bq[kQ ? kStages : 1][kQ ? kTileN : 1][kQ ? kBK : 16];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  // Each thread copies two 16-byte pieces of A per stage (64 rows x 4 pieces), and of B two
  // (16-bit: 64 rows x 4 pieces) or one (int8: 64 rows x 2 pieces, row tid / 2, codes
  // 16 (tid % 2) ..).
  const size_t rb = row_bytes<WT>(K);
  const T* a_src[2];
  const uint8_t* b_src[2];
  bool a_ok[2], b_ok[2];
  int row_of[2], col_of[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int v = tid + i * kThreads, r = v >> 2, c = (v & 3) * 8;
    row_of[i] = r, col_of[i] = c;
    const int slot = s0 + r;
    a_ok[i] = slot < s1;
    const int src_row = a_ok[i] ? (order ? order[slot] / top_k : slot) : 0;
    a_src[i] = in + size_t(src_row) * K + c;
    const int br = kQ ? tid >> 1 : r, bc = kQ ? (tid & 1) * 16 : c;  // int8: i = 0 only
    b_ok[i] = n0 + br < N;
    b_src[i] = reinterpret_cast<const uint8_t*>(W) + (size_t(e) * N + size_t(b_ok[i] ? n0 + br : 0)) * rb +
               size_t(bc) * sizeof(WT);
  }
  float2 params = {};  // int8: this thread's B row's (s, m - 1152 s)
  if constexpr (kQ) params = int8_row_params(b_src[0] - (tid & 1) * 16, K);
  const int ktiles = (K + kBK - 1) / kBK;
  auto load = [&](int stage, int kt) {
    const int k0 = kt * kBK;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const bool in_k = k0 + col_of[i] < K;
      cp_async16(&As[stage][row_of[i]][col_of[i]], a_src[i] + k0, a_ok[i] && in_k);
      if constexpr (kQ) {
        if (i == 0) cp_async16(&Bq[stage][tid >> 1][(tid & 1) * 16], b_src[0] + k0, b_ok[0]);
      } else {
        cp_async16(&Bs[stage][row_of[i]][col_of[i]], b_src[i] + size_t(k0) * sizeof(WT), b_ok[i] && in_k);
      }
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }

  const int wm = warp >> 1, wn = warp & 1;  // this warp's 32 slots x 32 rows
  float acc[2][4][4] = {};
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for all; stage kt - 1 is free to refill
    if (kt + kStages - 1 < ktiles) load((kt + kStages - 1) % kStages, kt + kStages - 1);
    cp_async_commit();
    const int st = kt % kStages;
    if constexpr (kQ) {  // this thread's 16 codes -> 16-bit weights (K % kBK == 0: no tail)
      const uint4 q = *reinterpret_cast<const uint4*>(&Bq[st][tid >> 1][(tid & 1) * 16]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float f[8];
        dequant8<T, WT>(q, h, params, f);
        *reinterpret_cast<uint4*>(&Bs[0][tid >> 1][(tid & 1) * 16 + 8 * h]) = pack8<T>(f);
      }
      __syncthreads();
    }
    const int bst = kQ ? 0 : st;
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ldmatrix_x4(a[mi], &As[st][wm * 32 + mi * 16 + (lane & 15)][ks + (lane >> 4) * 8]);
      // b[nj]: n-tiles 2 nj (regs 0, 1) and 2 nj + 1 (regs 2, 3), each k 0-7 then 8-15.
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)
        ldmatrix_x4(b[nj], &Bs[bst][wn * 32 + nj * 16 + (lane & 7) + (lane >> 4) * 8][ks + ((lane >> 3) & 1) * 8]);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni)
          mma16816<T>(acc[mi][ni], a[mi], b[ni >> 1][(ni & 1) * 2], b[ni >> 1][(ni & 1) * 2 + 1]);
    }
  }
  cp_async_wait<0>();

  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int slot = s0 + wm * 32 + mi * 16 + g + h * 8;
      if (slot >= s1) continue;
      O* o = out + size_t(slot) * N;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int r = n0 + wn * 32 + ni * 8 + 2 * t;
        if (r < N) o[r] = from_f<O>(acc[mi][ni][2 * h]);
        if (r + 1 < N) o[r + 1] = from_f<O>(acc[mi][ni][2 * h + 1]);
      }
    }
}

}  // namespace

template <typename T, typename WT, typename O>
cudaError_t gemm(const WT* W, int N, int K, const T* in, const int32_t* order, int top_k, const int32_t* tiles,
                 const int32_t* n_tiles, const int32_t* start, int grid_tiles, O* out, cudaStream_t s) {
  if (K % (kInt8Rows<WT> ? kBK : 8) != 0 || ceil_div(N, kTileN) > 65535) return cudaErrorInvalidValue;
  if (grid_tiles == 0) return cudaSuccess;
  gemm_kernel<T, WT, O><<<dim3(unsigned(grid_tiles), ceil_div(N, kTileN)), kThreads, 0, s>>>(W, N, K, in, order, top_k,
                                                                                          tiles, n_tiles, start, out);
  return cudaGetLastError();
}

#define LL_MOE_GEMM(T, WT, O)                                                                                 \
  template cudaError_t gemm<T, WT, O>(const WT*, int, int, const T*, const int32_t*, int, const int32_t*, \
                                      const int32_t*, const int32_t*, int, O*, cudaStream_t);
LL_MOE_GEMM(__half, __half, __half)
LL_MOE_GEMM(__half, __half, float)
LL_MOE_GEMM(__nv_bfloat16, __nv_bfloat16, __nv_bfloat16)
LL_MOE_GEMM(__nv_bfloat16, __nv_bfloat16, float)
LL_MOE_GEMM(__half, uint8_t, __half)
LL_MOE_GEMM(__half, uint8_t, float)
LL_MOE_GEMM(__nv_bfloat16, uint8_t, __nv_bfloat16)
LL_MOE_GEMM(__nv_bfloat16, uint8_t, float)
#undef LL_MOE_GEMM

}  // namespace lite_llama::cuda::moe
