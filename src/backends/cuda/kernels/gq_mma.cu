// Quantised (GQ, core/gq.h) weights times T <= kGqMmaMaxTokens tokens on tensor cores: each
// warp multiplies 16 weight rows by up to 64 tokens with mma.sync m16n8k16, dequantising weight
// pairs in registers straight from the packed codes, so no 16-bit copy of the matrix is written
// and re-read (the tile path's cost). A block's 16 warps (256 rows) share the activation chunk (up
// to 64 tokens x 128 k) in shared memory; activations, codes and group params stream through a
// 3-4 stage cp.async pipeline. K is split across blocks while the row blocks alone would leave
// most SMs idle, and the fp32 partials are summed in a fixed order (deterministic).
//
// mma only needs A and B to agree on the order of k, which is chosen so that every lane's codes
// and activations are whole words (see the kernel).
#include <cuda_fp8.h>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/gq_common.cuh"
#include "backends/cuda/func_attr.h"
#include "backends/cuda/launchers.h"
#include "backends/cuda/mma.cuh"
#include "backends/cuda/pdl.cuh"

namespace lite_llama::cuda {
namespace {

// 16 warps of 16 rows: more warps per SM hide the dequantise -> mma latency chains (with 8 warps
// of 32 rows ncu showed 2 warps per scheduler stalled most of the time).
constexpr int kWarps = 16, kWarpRows = 16, kMt = kWarpRows / 16, kThreads = kWarps * 32;
constexpr int kBlockRows = kWarps * kWarpRows, kKc = 128;

// Pair p (0..3) of a lane's 8 weights of one k-step pair, as raw floats: int4 nibbles -> 1024 + q
// and int8 bytes -> 1024 + (code + 128) through the fp16 0x6400 exponent trick (kOff below is
// folded into the offset), e4m3 through the hardware conversion.
template <int KIND>
__device__ __forceinline__ float2 code_pair(const uint32_t* v, int p) {
  if constexpr (KIND == kInt4) {
    return __half22float2(as_half2(((v[0] >> (4 * p)) & 0x000F000Fu) | 0x64006400u));
  } else if constexpr (KIND == kInt8) {
    return __half22float2(as_half2(__byte_perm(v[p >> 1], 0x64646464u, (p & 1) ? 0x4342 : 0x4140)));
  } else {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v[p >> 1] >> (16 * (p & 1))), __NV_E4M3);
    return __half22float2(__half2(r));
  }
}
// int4 pairs dequantised in the activation type's own pair arithmetic (bf16 or fp16).
template <typename T>
using Pair = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>;
template <typename T>
__device__ __forceinline__ Pair<T> to_pair(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat162_rn(v);
  else return __float2half2_rn(v);
}
template <int KIND>
constexpr float kOff = KIND == kInt4 ? 1024.f : KIND == kInt8 ? 1152.f : 0.f;

// Shared-memory swizzles (16-byte units), so that no two lanes of one access phase share banks:
// activations: unit u (k = 8u..) of token tok at u ^ 4 (tok & 1); codes: int4 rows (4 units) put
// unit u of row r at u ^ ((r >> 1) & 3), 8-bit rows (8 units) at 2 ((u >> 1) ^ (r & 3)) + (u & 1).
__device__ __forceinline__ int swz_x(int unit, int tok) { return unit ^ ((tok & 1) << 2); }
template <int KIND>
__device__ __forceinline__ int swz_w(int unit, int r) {
  if constexpr (KIND == kInt4) return unit ^ ((r >> 1) & 3);
  else return 2 * ((unit >> 1) ^ (r & 3)) + (unit & 1);
}

// Shared memory of one pipeline stage: activations [NTOK][16 units], codes [256 rows][RB bytes],
// group params [256 rows][PW words] (the chunk's (s, m) pairs: 128 / group of them; int4 groups
// are >= 32, 8-bit ones >= 16).
template <int KIND, int NTI>
struct Stage {
  static constexpr int kNtok = NTI * 8;
  static constexpr int kRowBytes = KIND == kInt4 ? kKc / 2 : kKc;
  static constexpr int kPWords = KIND == kInt4 ? 4 : 8;
  static constexpr int kXBytes = kNtok * kKc * 2, kWBytes = kBlockRows * kRowBytes, kPBytes = kBlockRows * kPWords * 4;
  static constexpr int kBytes = kXBytes + kWBytes + kPBytes;
  static constexpr int kStages = std::max(2, std::min(4, 220 * 1024 / kBytes));
};

// k order within a 128 chunk: at step pair jj (k-steps 2jj, 2jj + 1) lane tig of a quad takes the
// 8 weights k = 32 jj + 8 tig .. + 7 of its rows (one 32-bit word of int4 codes, two of 8-bit),
// pairs 0, 1 for the first k-step's a0-a3 and 2, 3 for the second; its activations are then the
// 16-byte unit 4 jj + tig of each token (b0, b1 = .x, .y; then .z, .w).
template <typename T, int KIND, int NTI>
__global__ void __launch_bounds__(kThreads) gemm_gq_mma_kernel(const T* __restrict__ x, const uint8_t* __restrict__ w,
                                                             size_t rb, int gshift, const T* __restrict__ bias,
                                                             void* __restrict__ out, bool out_f32,
                                                             float* __restrict__ part, int T_, int N, int K, int ldo,
                                                             int kper) {
  using S = Stage<KIND, NTI>;
  constexpr int NTOK = S::kNtok, RB = S::kRowBytes, UNITS = RB / 16, STAGES = S::kStages, PW = S::kPWords;
  constexpr int NV = KIND == kInt4 ? 1 : 2;  // code words per lane, row and step pair
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tig = lane & 3;
  const int t0 = blockIdx.z * NTOK, row0 = blockIdx.x * kBlockRows;
  const int k_begin = blockIdx.y * kper, k_end = min(K, k_begin + kper);
  const int nchunks = (k_end - k_begin + kKc - 1) / kKc;
  const size_t qb = KIND == kInt4 ? size_t(K) / 2 : size_t(K);
  const int pwords = gshift >= 7 ? 1 : kKc >> gshift;  // param words per row and chunk
  auto xs_of = [&](int st) { return reinterpret_cast<uint4*>(smem + st * S::kBytes); };
  auto ws_of = [&](int st) { return reinterpret_cast<uint4*>(smem + st * S::kBytes + S::kXBytes); };
  auto ps_of = [&](int st) { return reinterpret_cast<uint32_t*>(smem + st * S::kBytes + S::kXBytes + S::kWBytes); };

  // One chunk (128 k) of activations (load_x), codes and params (load_w) into stage st; rows
  // past N, tokens past T and k past the split's end read zeros. Each thread copies fixed
  // 16-byte columns of fixed rows, so the addresses are computed once.
  constexpr int XPT = (NTOK * (kKc / 8) + kThreads - 1) / kThreads, WPT = kBlockRows * UNITS / kThreads;
  constexpr int XSTEP = kThreads / (kKc / 8), WSTEP = kThreads / UNITS;  // tokens / rows per j
  const int xtok = threadIdx.x >> 4, xunit = threadIdx.x & 15;
  const T* xsrc = x + size_t(t0 + xtok) * K + xunit * 8;
  const int xdst = xtok * (kKc / 8) + swz_x(xunit, xtok);
  const int wr = threadIdx.x / UNITS, wunit = threadIdx.x % UNITS;
  const uint8_t* wsrc = w + size_t(row0 + wr) * rb + 16 * wunit;
  const int wdst = wr * UNITS + swz_w<KIND>(wunit, wr);
  int pshift = 0;
  while ((1 << pshift) < pwords) ++pshift;
  const int pr = threadIdx.x >> pshift, pj = threadIdx.x & (pwords - 1);
  const uint8_t* psrc = w + size_t(row0 + pr) * rb + qb + 4 * pj;
  auto load_x = [&](int c, int st) {
    const int kc = k_begin + c * kKc;
    uint4* xs = xs_of(st);
    const bool kok = kc + xunit * 8 < k_end;
#pragma unroll
    for (int j = 0; j < XPT; ++j) {
      if (XPT * XSTEP > NTOK && xtok + XSTEP * j >= NTOK) break;
      const bool ok = kok && t0 + xtok + XSTEP * j < T_;
      cp_async16(xs + xdst + j * XSTEP * (kKc / 8), ok ? xsrc + size_t(XSTEP * j) * K + kc : x, ok);
    }
  };
  auto load_w = [&](int c, int st) {
    const int kc = k_begin + c * kKc;
    uint4* ws = ws_of(st);
    const bool kok = kc + wunit * (KIND == kInt4 ? 32 : 16) < k_end;
    const size_t kb = KIND == kInt4 ? size_t(kc) / 2 : size_t(kc);
#pragma unroll
    for (int j = 0; j < WPT; ++j) {
      const bool ok = kok && row0 + wr + j * WSTEP < N;
      cp_async16(ws + wdst + j * kThreads, ok ? wsrc + size_t(j * WSTEP) * rb + kb : w, ok);
    }
    uint32_t* ps = ps_of(st);
    const bool pok = kc + (pj << min(gshift, 7)) < k_end;
    const size_t pb = size_t(kc >> gshift) * 4;
    for (int r = pr, j = 0; r < kBlockRows; r += kThreads >> pshift, ++j) {
      const bool ok = pok && row0 + r < N;
      cp_async4(ps + r * PW + pj, ok ? psrc + size_t(j * (kThreads >> pshift)) * rb + pb : w, ok);
    }
  };

  float acc[kMt][NTI][4];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < NTI; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][nt][q] = 0.f;
  // Weights first: they do not depend on the kernel before this one (see pdl.cuh).
#pragma unroll
  for (int c = 0; c < STAGES - 1; ++c)
    if (c < nchunks) load_w(c, c);
  pdl_wait();
#pragma unroll
  for (int c = 0; c < STAGES - 1; ++c) {
    if (c < nchunks) load_x(c, c);
    asm volatile("cp.async.commit_group;");
  }
  for (int c = 0; c < nchunks; ++c) {
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2));
    __syncthreads();
    if (c + STAGES - 1 < nchunks) {
      load_w(c + STAGES - 1, (c + STAGES - 1) % STAGES);
      load_x(c + STAGES - 1, (c + STAGES - 1) % STAGES);
    }
    asm volatile("cp.async.commit_group;");
    const int st = c % STAGES;
    const uint4* xs = xs_of(st);
    const uint32_t* wsw = reinterpret_cast<const uint32_t*>(ws_of(st));
    const uint32_t* ps = ps_of(st);
    // Rolled: the unrolled chunk overflowed the instruction cache (ncu: "no instruction" stalls).
#pragma unroll 1
    for (int jj = 0; jj < 4; ++jj) {
      // This lane's rows 8 i + g (m-tile i / 2, upper half i % 2): codes and (s, m').
      uint32_t v[2 * kMt][NV];
      float sc[2 * kMt], mo[2 * kMt];
      Pair<T> s2[2 * kMt], m2[2 * kMt];  // int4: pair math in the activation type (see below)
#pragma unroll
      for (int i = 0; i < 2 * kMt; ++i) {
        const int r = warp * kWarpRows + 8 * i + g;
        if constexpr (KIND == kInt4) {
          v[i][0] = wsw[r * (RB / 4) + 4 * (jj ^ ((r >> 1) & 3)) + tig];
        } else {
          const uint2 q = *reinterpret_cast<const uint2*>(wsw + r * (RB / 4) + 2 * (4 * (jj ^ (r & 3)) + tig));
          v[i][0] = q.x, v[i][1] = q.y;
        }
        const int word = gshift >= 7 ? 0 : (32 * jj + 8 * tig) >> gshift;
        const float2 f = __half22float2(as_half2(ps[r * PW + word]));
        sc[i] = f.x, mo[i] = fmaf(-kOff<KIND>, f.x, f.y);
        if constexpr (KIND == kInt4) s2[i] = to_pair<T>(f.x), m2[i] = to_pair<T>(fmaf(8.f, f.x, f.y));
      }
      uint32_t a[2][kMt][4];  // [k-step 2jj + hh][m-tile][fragment register]
#pragma unroll
      for (int hh = 0; hh < 2; ++hh)
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            // a0: row g, pair 2hh (k 2tig..); a1: row g + 8; a2, a3: pair 2hh + 1 (k 2tig + 8..).
            const int i = 2 * mt + (q & 1), p = 2 * hh + (q >> 1);
            if constexpr (KIND == kInt4) {
              // 0x4300 | q is the bf16 128 + q, 0x6400 | q the fp16 1024 + q: 3 instructions a
              // pair instead of 7. Centred, w = (q - 8) s + (m + 8 s), so that rounding s and the
              // centre to 16 bits errs like rounding the weight itself, without m and q s
              // cancelling.
              constexpr bool kBf = std::is_same_v<T, __nv_bfloat16>;
              Pair<T> h;
              const uint32_t bits = ((v[i][0] >> (4 * p)) & 0x000F000Fu) | (kBf ? 0x43004300u : 0x64006400u);
              memcpy(&h, &bits, 4);
              const Pair<T> wv = __hfma2(__hsub2(h, to_pair<T>(kBf ? 136.f : 1032.f)), s2[i], m2[i]);
              memcpy(&a[hh][mt][q], &wv, 4);
            } else {
              const float2 cw = code_pair<KIND>(v[i], p);
              a[hh][mt][q] = pack2<T>(fmaf(cw.x, sc[i], mo[i]), fmaf(cw.y, sc[i], mo[i]));
            }
          }
#pragma unroll
      for (int nt = 0; nt < NTI; ++nt) {
        const int tok = nt * 8 + g;
        const uint4 xb = xs[tok * (kKc / 8) + swz_x(4 * jj + tig, tok)];
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) {
          mma16816<T>(acc[mt][nt], a[0][mt], xb.x, xb.y);
          mma16816<T>(acc[mt][nt], a[1][mt], xb.z, xb.w);
        }
      }
    }
  }
  asm volatile("cp.async.wait_all;");
  // C fragment: acc[mt][nt][q] is row 16 mt + g + 8 (q >> 1) of the warp, token 8 nt + 2 tig + (q & 1).
  const int wrow0 = row0 + warp * kWarpRows;
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int nt = 0; nt < NTI; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int r = wrow0 + 16 * mt + g + 8 * (q >> 1), t = t0 + 8 * nt + 2 * tig + (q & 1);
        if (r >= N || t >= T_) continue;
        float val = acc[mt][nt][q];
        if (part) {
          part[(size_t(blockIdx.y) * T_ + t) * N + r] = val;
        } else {
          if (bias) val += to_f(bias[r]);
          if (out_f32) static_cast<float*>(out)[size_t(t) * ldo + r] = val;
          else static_cast<T*>(out)[size_t(t) * ldo + r] = from_f<T>(val);
        }
      }
}

// out[t, n] = sum over splits of part[split, t, n] (+ bias[n]), in split order.
template <typename T>
__global__ void sum_parts_kernel(const float* __restrict__ part, int splits, const T* __restrict__ bias,
                                 void* __restrict__ out, bool out_f32, int T_, int N, int ldo) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(T_) * N) return;
  const int t = int(i / N), n = int(i % N);
  float v = 0.f;
  for (int s = 0; s < splits; ++s) v += part[(size_t(s) * T_ + t) * N + n];
  if (bias) v += to_f(bias[n]);
  if (out_f32) static_cast<float*>(out)[size_t(t) * ldo + n] = v;
  else static_cast<T*>(out)[size_t(t) * ldo + n] = from_f<T>(v);
}

template <typename T, int KIND, int NTI>
cudaError_t launch(const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out,
                   bool out_f32, int T_, int N, int K, int ldo, void* ws, size_t ws_bytes, cudaStream_t s) {
  constexpr int NTOK = NTI * 8;
  const int row_blocks = ceil_div(N, kBlockRows), tok_tiles = ceil_div(T_, NTOK);
  const int chunks = ceil_div(K, kKc);
  // Split K while the blocks would fill less than half the GPU (one block of 16 warps per SM),
  // as far as the workspace holds the partials: partials cost a write and a read per split.
  const int blocks = row_blocks * tok_tiles;
  int splits = 2 * blocks >= q.num_sms ? 1 : std::min(std::min(int(ceil_div(q.num_sms, blocks)), chunks), 16);
  const size_t per_split = size_t(T_) * size_t(N) * sizeof(float);
  splits = std::max(1, std::min<int>(splits, int(ws_bytes / per_split)));
  const int kper = ceil_div(chunks, splits) * kKc;
  splits = ceil_div(K, kper);
  float* part = splits > 1 ? static_cast<float*>(ws) : nullptr;
  const dim3 grid(row_blocks, splits, tok_tiles);
  constexpr int smem = Stage<KIND, NTI>::kBytes * Stage<KIND, NTI>::kStages;
  // Set per device: tensor-parallel ranks launch this kernel on several GPUs.
  if (cudaError_t e = set_func_attr(gemm_gq_mma_kernel<T, KIND, NTI>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = launch_pdl(q.pdl, gemm_gq_mma_kernel<T, KIND, NTI>, grid, dim3(kThreads), smem, s,
                                 static_cast<const T*>(x), static_cast<const uint8_t*>(w), q.row_bytes, gshift,
                                 static_cast<const T*>(bias), out, out_f32, part, T_, N, K, ldo, kper);
      e != cudaSuccess || !part)
    return e;
  const int64_t total = int64_t(T_) * N;
  sum_parts_kernel<T><<<unsigned(ceil_div(total, 256)), 256, 0, s>>>(part, splits, static_cast<const T*>(bias), out,
                                                                     out_f32, T_, N, ldo);
  return cudaGetLastError();
}

template <typename T, int KIND>
cudaError_t by_tokens(const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out,
                      bool out_f32, int T_, int N, int K, int ldo, void* ws, size_t ws_bytes, cudaStream_t s) {
  if (T_ <= 16) return launch<T, KIND, 2>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, ws, ws_bytes, s);
  if (T_ <= 32) return launch<T, KIND, 4>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, ws, ws_bytes, s);
  return launch<T, KIND, 8>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, ws, ws_bytes, s);
}

template <typename T>
cudaError_t by_kind(const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out,
                    bool out_f32, int T_, int N, int K, int ldo, void* ws, size_t ws_bytes, cudaStream_t s) {
  switch (q.kind) {
    case kInt8: return by_tokens<T, kInt8>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, ws, ws_bytes, s);
    case kInt4: return by_tokens<T, kInt4>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, ws, ws_bytes, s);
    case kFp8: return by_tokens<T, kFp8>(q, gshift, x, w, bias, out, out_f32, T_, N, K, ldo, ws, ws_bytes, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t gemm_gq_mma(Act act, const GqArgs& q, const void* x, const void* w, const void* bias, void* out,
                        bool out_f32, int T, int N, int K, int ldo, void* ws, size_t ws_bytes, cudaStream_t s) {
  const int gshift = group_shift(q.group);
  if (gshift < 0 || (q.group && q.group < 16) || T < 1 || K % 32 != 0 || q.num_sms < 1)
    return cudaErrorInvalidValue;
  if (act == Act::BF16)
    return by_kind<__nv_bfloat16>(q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, ws, ws_bytes, s);
  return by_kind<__half>(q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, ws, ws_bytes, s);
}

}  // namespace lite_llama::cuda
