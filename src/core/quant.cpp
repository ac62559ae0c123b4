#include "core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/gq.h"
#include "core/half.h"

namespace lite_llama {
namespace {

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = (int(b[i].qs[j] & 0x0f) - 8) * d;
      y[i * kQK + j + kQK / 2] = (int(b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = (b[i].qs[j] & 0x0f) * d + m;
      y[i * kQK + j + kQK / 2] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}

// 5-bit codes: low nibble as Q4_0, the 5th bit of element j (j < 16) in qh bit j, of element
// j + 16 in qh bit j + 16 (ggml's layout).
template <typename B>
void q5_codes(const B& b, int* q) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (b.qs[j] & 0x0f) | int(((qh >> j) & 1) << 4);
    q[j + kQK / 2] = (b.qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
  }
}

void dequant_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d);
    q5_codes(b[i], q);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = float(q[j] - 16) * d;
  }
}

void dequant_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    q5_codes(b[i], q);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = float(q[j]) * d + m;
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = b[i].qs[j] * d;
  }
}


void dequant_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    int is = 0;
    for (int j = 0; j < kQK_K; j += 64) {
      uint8_t sc, m;
      scale_min_k4(is + 0, b[i].scales, &sc, &m);
      float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, b[i].scales, &sc, &m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void dequant_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kQK_K; j += 64) {
      uint8_t sc, m;
      scale_min_k4(is + 0, b[i].scales, &sc, &m);
      float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, b[i].scales, &sc, &m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    float d = f16_to_f32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace

void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  if (auto f = gq_format(t)) return dequantize_row_gq(*f, src, dst, n);
  int64_t nb = n / dtype_info(t).block_size;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::Q4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case DType::Q4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
    case DType::Q8_0: dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case DType::Q5_0: dequant_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb); return;
    case DType::Q5_1: dequant_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb); return;
    case DType::Q4_K: dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb); return;
    case DType::Q5_K: dequant_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb); return;
    case DType::Q6_K: dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb); return;
    default: fail("cannot dequantize tensors of type {}", dtype_name(t));
  }
}

void quantize_row_q8_0(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[i * kQK + j]));
    float d = amax / 127.f, id = d ? 1.f / d : 0.f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = int8_t(std::lround(x[i * kQK + j] * id));
  }
}

void quantize_row_q8_1(const float* x, BlockQ8_1* b, int64_t n) {
  for (int64_t i = 0; i < n / kQK; ++i) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[i * kQK + j]));
    float d = amax / 127.f, id = d ? 1.f / d : 0.f;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b[i].qs[j] = int8_t(std::lround(x[i * kQK + j] * id));
      sum += b[i].qs[j];
    }
    b[i].d = d;
    b[i].s = d * float(sum);
  }
}

void quantize_row_q4_0(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* v = x + i * kQK;
    float amax = 0, max = 0;
    for (int j = 0; j < kQK; ++j)
      if (std::fabs(v[j]) > amax) amax = std::fabs(v[j]), max = v[j];
    float d = max / -8.f, id = d ? 1.f / d : 0.f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      int q0 = std::min(15, int(v[j] * id + 8.5f));
      int q1 = std::min(15, int(v[j + kQK / 2] * id + 8.5f));
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q4_1(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* v = x + i * kQK;
    float lo = v[0], hi = v[0];
    for (int j = 1; j < kQK; ++j) lo = std::min(lo, v[j]), hi = std::max(hi, v[j]);
    float d = (hi - lo) / 15.f, id = d ? 1.f / d : 0.f;
    b[i].d = f32_to_f16(d);
    b[i].m = f32_to_f16(lo);
    for (int j = 0; j < kQK / 2; ++j) {
      int q0 = std::min(15, int((v[j] - lo) * id + 0.5f));
      int q1 = std::min(15, int((v[j + kQK / 2] - lo) * id + 0.5f));
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void q5_0_to_q8_0(const void* src, void* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ5_0*>(src);
  auto* out = static_cast<BlockQ8_0*>(dst);
  int q[kQK];
  for (int64_t i = 0; i < n / kQK; ++i) {
    q5_codes(in[i], q);
    out[i].d = in[i].d;
    for (int j = 0; j < kQK; ++j) out[i].qs[j] = int8_t(q[j] - 16);
  }
}

void quantize_row(DType t, const float* x, void* dst, int64_t n) {
  if (auto f = gq_format(t)) return quantize_row_gq(*f, x, dst, n);
  switch (t) {
    case DType::F32: std::memcpy(dst, x, size_t(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(x[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(x[i]);
      return;
    case DType::Q8_0: quantize_row_q8_0(x, dst, n); return;
    case DType::Q4_0: quantize_row_q4_0(x, dst, n); return;
    case DType::Q4_1: quantize_row_q4_1(x, dst, n); return;
    default: fail("cannot quantize to type {}", dtype_name(t));
  }
}

}  // namespace lite_llama
