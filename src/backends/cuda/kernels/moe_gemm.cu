// Prefill-sized mixture-of-experts projections on tensor cores: one launch for all experts. The
// assignments are sorted by expert (moe.cu); each block takes one tile of up to kTileM slots of
// one expert and kTileN of its weight rows, gathers the slots' activation rows and the weight
// rows through a 3-stage cp.async ring and multiplies them with mma.sync m16n8k16 (fp32
// accumulators). Four warps, each 32 slots x 32 rows.
//
// GQ expert rows (int8 / fp8 / int4, moe_internal.cuh) are dequantised in shared memory before the
// mma: their codes come through the same ring (a half or a quarter of the bytes) with each
// thread's (s, m) word, and after each stage lands every thread turns 16 codes into 16-bit
// weights of one tile buffer (gq_common.cuh's dequant_pair, the dense kernels' rounding), which
// the warps' ldmatrix then reads as in the 16-bit case.
#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/moe_internal.cuh"
#include "backends/cuda/mma.cuh"

namespace lite_llama::cuda::moe {
namespace {

constexpr int kBK = 32, kStages = 3;
constexpr int kLd = kBK + 8;  // padded row: ldmatrix rows 80 bytes apart hit distinct banks
constexpr int kThreads = 128;

// Static shared memory (bytes): As 3 x 64 x 40 x 2 = 15,360; 16-bit Bs the same (30,720 in all);
// GQ: Bs one tile (5,120), codes Bq 3 x 64 x 32 (int8, fp8: 6,144) or 3 x 64 x 16 (int4, 3,072) and
// the (s, m) words Bp 3 x 128 x 4 (1,536): 28,160 / 25,088 in all.
template <typename T, int KIND, typename O>
__global__ void __launch_bounds__(kThreads)
    gemm_kernel(Rows W, int N, int K, const T* __restrict__ in, const int32_t* __restrict__ order, int top_k,
                const int32_t* __restrict__ tiles, const int32_t* __restrict__ n_tiles,
                const int32_t* __restrict__ start, O* __restrict__ out) {
  constexpr bool kQ = KIND != k16Bit;
  // GQ: a stage's codes are kTileN rows of kCodeRow bytes (kBK weights), copied in 16-byte pieces
  // by the first kPieces threads; thread tid dequantises weights 16 (tid % 2) .. + 15 of row
  // tid / 2 of the tile, whose codes are the kThreadBytes at tid kThreadBytes.
  constexpr int kCodeRow = kQ ? int(code_bytes<KIND>(kBK)) : 16;
  constexpr int kPieces = kTileN * kCodeRow / 16, kThreadBytes = kCodeRow / 2;
  static_assert(!kQ || (kPieces <= kThreads && kTileN * 2 == kThreads), "one thread per 16 weights of a stage");
  const int tile = blockIdx.x;
  if (tile >= *n_tiles) return;
  const int e = tiles[2 * tile], s0 = tiles[2 * tile + 1];
  const int s1 = min(s0 + kTileM, start[e + 1]);
  const int n0 = int(blockIdx.y) * kTileN;
  __shared__ __align__(16) T As[kStages][kTileM][kLd];
  // 16-bit weights: a ring of kStages tiles. GQ: the ring holds the codes (Bq) and (s, m) words
  // (Bp), and Bs[0] the stage being multiplied, dequantised.
  __shared__ __align__(16) T Bs[kQ ? 1 : kStages][kTileN][kLd];
  __shared__ __align__(16) uint8_t Bq[kQ ? kStages : 1][kQ ? kTileN * kCodeRow : 16];
  __shared__ uint32_t Bp[kQ ? kStages : 1][kQ ? kThreads : 1];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  // Each thread copies two 16-byte pieces of A per stage (64 rows x 4 pieces); of 16-bit B two
  // (the same places), of GQ B at most one piece of codes (row tid / (kCodeRow / 16)) and the
  // (s, m) word of its own 16 weights.
  const size_t rb = W.row_bytes;
  auto row_ptr = [&](int r, bool ok) { return W.data + (size_t(e) * N + size_t(ok ? n0 + r : 0)) * rb; };
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
    const int br = kQ ? tid / (kCodeRow / 16) : r, bc = kQ ? 16 * (tid % (kCodeRow / 16)) : c * 2;
    b_ok[i] = n0 + br < N && (!kQ || tid < kPieces);
    b_src[i] = row_ptr(br, b_ok[i]) + bc;  // GQ: i = 0 only
  }
  const bool p_ok = kQ && n0 + (tid >> 1) < N;
  const uint32_t* p_src = reinterpret_cast<const uint32_t*>(row_ptr(tid >> 1, p_ok) + code_bytes<KIND>(K));
  const int p_k = 16 * (tid & 1);  // the thread's first weight in a k-tile
  // A thread's (s, m) word changes only where a group starts: per-channel rows read it once here,
  // grouped rows through the ring at the k-tiles that start a group. A word per row and k-tile
  // would double the sectors a stage fetches (int8 batch 64 on the H100 was 31% slower so).
  const bool per_row = W.gshift >= 31;
  auto starts_group = [&](int kt) { return per_row ? kt == 0 : ((kt * kBK) & ((1 << W.gshift) - 1)) == 0; };
  uint32_t cur_p = kQ && per_row && p_ok ? __ldg(p_src) : 0u;
  const int ktiles = (K + kBK - 1) / kBK;
  auto load = [&](int stage, int kt) {
    const int k0 = kt * kBK;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const bool in_k = k0 + col_of[i] < K;
      cp_async16(&As[stage][row_of[i]][col_of[i]], a_src[i] + k0, a_ok[i] && in_k);
      if constexpr (!kQ) cp_async16(&Bs[stage][row_of[i]][col_of[i]], b_src[i] + size_t(k0) * 2, b_ok[i] && in_k);
    }
    if constexpr (kQ) {  // K % kBK == 0: no k tail
      if (tid < kPieces) cp_async16(&Bq[stage][16 * tid], b_src[0] + code_bytes<KIND>(k0), b_ok[0]);
      if (!per_row && starts_group(kt)) cp_async4(&Bp[stage][tid], p_src + ((k0 + p_k) >> W.gshift), p_ok);
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
    if constexpr (kQ) {  // this thread's 16 codes -> 16-bit weights
      const uint8_t* src = &Bq[st][kThreadBytes * tid];
      uint4 q;
      if constexpr (kThreadBytes == 16) {
        q = *reinterpret_cast<const uint4*>(src);
      } else {  // int4: two words, pairs 0-7 (code_bits reads words p / 4)
        const uint2 h = *reinterpret_cast<const uint2*>(src);
        q = make_uint4(h.x, h.y, 0u, 0u);
      }
      if (!per_row && starts_group(kt)) cur_p = Bp[st][tid];
      const Params p = prep_params<T, KIND>(cur_p);
      uint32_t w[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) w[j] = dequant_pair<T, KIND>(q, j, p);
      uint4* dst = reinterpret_cast<uint4*>(&Bs[0][tid >> 1][p_k]);
      dst[0] = make_uint4(w[0], w[1], w[2], w[3]);
      dst[1] = make_uint4(w[4], w[5], w[6], w[7]);
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

template <typename T, int KIND, typename O>
cudaError_t gemm(const Rows& W, int N, int K, const T* in, const int32_t* order, int top_k, const int32_t* tiles,
                 const int32_t* n_tiles, const int32_t* start, int grid_tiles, O* out, cudaStream_t s) {
  if (K % (KIND == k16Bit ? 8 : kBK) != 0 || ceil_div(N, kTileN) > 65535) return cudaErrorInvalidValue;
  if (grid_tiles == 0) return cudaSuccess;
  gemm_kernel<T, KIND, O><<<dim3(unsigned(grid_tiles), ceil_div(N, kTileN)), kThreads, 0, s>>>(
      W, N, K, in, order, top_k, tiles, n_tiles, start, out);
  return cudaGetLastError();
}

#define LL_MOE_GEMM(T, KIND, O)                                                                          \
  template cudaError_t gemm<T, KIND, O>(const Rows&, int, int, const T*, const int32_t*, int, const int32_t*, \
                                        const int32_t*, const int32_t*, int, O*, cudaStream_t);
#define LL_MOE_GEMM_KINDS(T)    \
  LL_MOE_GEMM(T, k16Bit, T)     \
  LL_MOE_GEMM(T, k16Bit, float) \
  LL_MOE_GEMM(T, kInt8, T)      \
  LL_MOE_GEMM(T, kInt8, float)  \
  LL_MOE_GEMM(T, kInt4, T)      \
  LL_MOE_GEMM(T, kInt4, float)  \
  LL_MOE_GEMM(T, kFp8, T)       \
  LL_MOE_GEMM(T, kFp8, float)
LL_MOE_GEMM_KINDS(__half)
LL_MOE_GEMM_KINDS(__nv_bfloat16)
#undef LL_MOE_GEMM_KINDS
#undef LL_MOE_GEMM

}  // namespace lite_llama::cuda::moe
