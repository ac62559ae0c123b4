// Quantised (GQ, core/gq.h) weights times 8 < T <= kGqMmaMaxTokens tokens on tensor cores: each
// warp multiplies 32 weight rows by up to 64 tokens with mma.sync m16n8k16, dequantising weight
// pairs in registers straight from the packed codes, so no 16-bit copy of the matrix is written
// and re-read (the tile path's cost). A block's 8 warps (256 rows) share the activation chunk
// (64 tokens x 128 k) in shared memory, double-buffered with cp.async; the next chunk's weights
// are loaded into registers while the current one is multiplied. K is split across blocks until
// the GPU is full, and the fp32 partials are summed in a fixed order (deterministic).
//
// k order: mma only needs A and B to agree on k, so each lane of a quad reads its own 32
// consecutive weights (16 bytes of int4 or 32 of int8 / fp8) of rows g and g + 8, and the k-step
// s of a 128 chunk takes weight pairs 2s and 2s + 1 of every lane's slice; the matching
// activations are 8 consecutive values per two steps, one 16-byte shared-memory load.
#include <cuda_fp8.h>

#include "backends/cuda/common.cuh"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {
namespace {

constexpr int kInt8 = 0, kInt4 = 1, kFp8 = 2;
constexpr int kWarps = 8, kWarpRows = 32, kBlockRows = kWarps * kWarpRows, kKc = 128;

__device__ __forceinline__ __half2 as_half2(uint32_t v) {
  __half2 h;
  memcpy(&h, &v, 4);
  return h;
}

template <typename T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    uint32_t r;
    memcpy(&r, &h, 4);
    return r;
  }
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<__half> {
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    uint32_t r;
    memcpy(&r, &h, 4);
    return r;
  }
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ void cp_async16(void* smem, const void* src, bool ok) {
  const unsigned dst = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}

// Pair P (weights 2P, 2P + 1 of a lane's 32-weight slice) as codes: int4 nibbles and int8 bytes
// through the fp16 0x6400 exponent trick, e4m3 through the hardware conversion.
template <int KIND>
__device__ __forceinline__ float2 code_pair(const uint32_t* v, int P) {
  if constexpr (KIND == kInt4) {
    const uint32_t h = ((v[P >> 2] >> (4 * (P & 3))) & 0x000F000Fu) | 0x64006400u;
    const float2 f = __half22float2(as_half2(h));
    return make_float2(f.x - 1024.f, f.y - 1024.f);
  } else if constexpr (KIND == kInt8) {
    const uint32_t h = __byte_perm(v[P >> 1], 0x64646464u, (P & 1) ? 0x4342 : 0x4140);
    const float2 f = __half22float2(as_half2(h));
    return make_float2(f.x - 1152.f, f.y - 1152.f);  // 1024 (exponent) + 128 (code bias)
  } else {
    const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v[P >> 1] >> (16 * (P & 1))), __NV_E4M3);
    return __half22float2(__half2(r));
  }
}

// The 16-byte unit `unit` (k = 8 unit ..) of token `tok` in a chunk sits at this index: the 8
// lanes of one shared-memory phase (g in {0, 1}, tig 0..3, same jj) then hit 8 different 16-byte
// bank groups.
__device__ __forceinline__ int swz(int unit, int tok) { return unit ^ (((unit >> 3) & 1) << 1) ^ (tok & 1); }

template <typename T, int KIND, int NTI>
__global__ void __launch_bounds__(256) gemm_gq_mma_kernel(const T* __restrict__ x, const uint8_t* __restrict__ w,
                                                          size_t rb, int gshift, const T* __restrict__ bias,
                                                          void* __restrict__ out, bool out_f32, float* __restrict__ part,
                                                          int T_, int N, int K, int ldo, int kper) {
  constexpr int NTOK = NTI * 8;
  constexpr int NW = KIND == kInt4 ? 4 : 8;  // 32-bit words of a lane's 32-weight slice
  __shared__ __align__(16) uint4 xs[2][NTOK][kKc / 8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tig = lane & 3;
  const int t0 = blockIdx.z * NTOK;
  const int k_begin = blockIdx.y * kper, k_end = min(K, k_begin + kper);
  const size_t qb = KIND == kInt4 ? size_t(K) / 2 : size_t(K);
  const int wrow0 = blockIdx.x * kBlockRows + warp * kWarpRows;
  // This lane's rows: wrow0 + 8 i + g (i = 0..3: m-tile i / 2, upper half i % 2).
  const uint8_t* rows[4];
  bool rok[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = wrow0 + 8 * i + g;
    rok[i] = r < N;
    rows[i] = w + size_t(rok[i] ? r : 0) * rb;
  }

  auto load_x = [&](int kc, int buf) {
    for (int u = threadIdx.x; u < NTOK * (kKc / 8); u += 256) {
      const int tok = u / (kKc / 8), unit = u % (kKc / 8);
      const int t = t0 + tok, k = kc + unit * 8;
      const bool ok = t < T_ && k < k_end;
      cp_async16(&xs[buf][tok][swz(unit, tok)], ok ? x + size_t(t) * K + k : x, ok);
    }
    asm volatile("cp.async.commit_group;");
  };
  auto load_w = [&](int kc, uint32_t (&v)[4][NW], float2 (&sm)[4][2]) {
    const int k = kc + 32 * tig;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const bool ok = k < k_end && rok[i];
      const uint8_t* codes = rows[i] + (KIND == kInt4 ? size_t(k) / 2 : size_t(k));
#pragma unroll
      for (int c = 0; c < NW / 4; ++c) {
        const uint4 q = ok ? ld_stream(codes + 16 * c) : make_uint4(0, 0, 0, 0);
        v[i][4 * c] = q.x, v[i][4 * c + 1] = q.y, v[i][4 * c + 2] = q.z, v[i][4 * c + 3] = q.w;
      }
      const uint32_t* params = reinterpret_cast<const uint32_t*>(rows[i] + qb);
#pragma unroll
      for (int h = 0; h < 2; ++h)
        sm[i][h] = ok ? __half22float2(as_half2(__ldg(params + ((k + 16 * h) >> gshift)))) : make_float2(0.f, 0.f);
    }
  };

  float acc[2][NTI][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < NTI; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mt][nt][q] = 0.f;
  uint32_t v[4][NW];
  float2 sm[4][2];
  load_x(k_begin, 0);
  load_w(k_begin, v, sm);
  int buf = 0;
  for (int kc = k_begin; kc < k_end; kc += kKc, buf ^= 1) {
    asm volatile("cp.async.wait_all;");
    __syncthreads();
    const bool more = kc + kKc < k_end;
    uint32_t vn[4][NW];
    float2 smn[4][2];
    if (more) {
      load_x(kc + kKc, buf ^ 1);
      load_w(kc + kKc, vn, smn);
    }
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      uint4 xb[NTI];
#pragma unroll
      for (int nt = 0; nt < NTI; ++nt) {
        const int tok = nt * 8 + g;
        xb[nt] = xs[buf][tok][swz(4 * tig + jj, tok)];
      }
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int s = 2 * jj + hh;  // k-step: pairs 2s (k 2tig..) and 2s + 1 (k 2tig + 8..)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          uint32_t a[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int i = 2 * mt + (q & 1), P = 2 * s + (q >> 1);
            const float2 c = code_pair<KIND>(v[i], P);
            const float2 f = sm[i][P >> 3];
            a[q] = Mma<T>::pack(fmaf(c.x, f.x, f.y), fmaf(c.y, f.x, f.y));
          }
#pragma unroll
          for (int nt = 0; nt < NTI; ++nt)
            Mma<T>::run(acc[mt][nt], a, hh ? xb[nt].z : xb[nt].x, hh ? xb[nt].w : xb[nt].y);
        }
      }
    }
    if (more) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < NW; ++j) v[i][j] = vn[i][j];
        sm[i][0] = smn[i][0], sm[i][1] = smn[i][1];
      }
    }
  }
  // C fragment: acc[mt][nt][q] is row wrow0 + 16 mt + g + 8 (q >> 1), token t0 + 8 nt + 2 tig + (q & 1).
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
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

int sm_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 100;
  }();
  return sms;
}

template <typename T, int KIND, int NTI>
cudaError_t launch(const GqArgs& q, int gshift, const void* x, const void* w, const void* bias, void* out,
                   bool out_f32, int T_, int N, int K, int ldo, void* ws, size_t ws_bytes, cudaStream_t s) {
  constexpr int NTOK = NTI * 8;
  const int row_blocks = ceil_div(N, kBlockRows), tok_tiles = ceil_div(T_, NTOK);
  const int chunks = ceil_div(K, kKc);
  // Split K until the blocks about fill the GPU (one block of 8 streaming warps per SM), as far
  // as the workspace holds the partials.
  int splits = std::min(std::min(int(ceil_div(sm_count(), row_blocks * tok_tiles)), chunks), 16);
  const size_t per_split = size_t(T_) * size_t(N) * sizeof(float);
  splits = std::max(1, std::min<int>(splits, int(ws_bytes / per_split)));
  const int kper = ceil_div(chunks, splits) * kKc;
  splits = ceil_div(K, kper);
  float* part = splits > 1 ? static_cast<float*>(ws) : nullptr;
  const dim3 grid(row_blocks, splits, tok_tiles);
  gemm_gq_mma_kernel<T, KIND, NTI><<<grid, kWarps * 32, 0, s>>>(
      static_cast<const T*>(x), static_cast<const uint8_t*>(w), q.row_bytes, gshift, static_cast<const T*>(bias),
      out, out_f32, part, T_, N, K, ldo, kper);
  if (!part) return cudaGetLastError();
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
  int gshift = q.group == 0 ? 31 : 0;
  while (q.group && (1 << gshift) < q.group) ++gshift;
  if ((q.group && (1 << gshift) != q.group) || (q.group && q.group < 16) || T < 1 || K % 32 != 0)
    return cudaErrorInvalidValue;
  if (act == Act::BF16)
    return by_kind<__nv_bfloat16>(q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, ws, ws_bytes, s);
  return by_kind<__half>(q, gshift, x, w, bias, out, out_f32, T, N, K, ldo, ws, ws_bytes, s);
}

}  // namespace lite_llama::cuda
