#include "core/gq.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"

namespace lite_llama {
namespace {

struct Entry {
  DType t;
  GqFormat f;
};
constexpr Entry kFormats[] = {
    {DType::GQ8, {GqKind::Int8, 0}},         {DType::GQ8_G16, {GqKind::Int8, 16}},
    {DType::GQ8_G32, {GqKind::Int8, 32}},    {DType::GQ4_G32, {GqKind::Int4, 32}},
    {DType::GQ4_G64, {GqKind::Int4, 64}},    {DType::GQ4_G128, {GqKind::Int4, 128}},
    {DType::GQ4, {GqKind::Int4, 0}},         {DType::GF8, {GqKind::Fp8, 0}},
    {DType::GF8_G128, {GqKind::Fp8, 128}},
};

// Unsigned codes (0..2c-1) held as int8 become code - c with offset m + c s: the same weights,
// but the decode GEMV's int8 activation rounding then scales with |w|, not |w - m|.
void center_codes(int32_t* codes, const float* s, float* m, int64_t K, int64_t G, int c) {
  for (int64_t k = 0; k < K; ++k) codes[k] -= c;
  for (int64_t g = 0; g < K / G; ++g) m[g] += float(c) * s[g];
}

uint16_t* params_of(GqFormat f, void* row, int64_t K) {
  return reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(row) + f.code_bytes(K));
}

}  // namespace

float e4m3_to_f32(uint8_t v) {
  const int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  if (e == 15 && m == 7) return NAN;
  const float mag = e == 0 ? std::ldexp(float(m) / 8.f, -6) : std::ldexp(1.f + float(m) / 8.f, e - 7);
  return s ? -mag : mag;
}

// Nearest e4m3 code (ties to the even code), saturating at +-448.
uint8_t f32_to_e4m3(float x) {
  static const std::array<float, 127> mags = [] {
    std::array<float, 127> a{};
    for (int i = 0; i < 127; ++i) a[size_t(i)] = e4m3_to_f32(uint8_t(i));
    return a;
  }();
  const float ax = std::min(std::fabs(x), 448.f);
  const auto it = std::lower_bound(mags.begin(), mags.end(), ax);
  int code = int(it - mags.begin());
  if (code > 0) {
    const float lo = mags[size_t(code - 1)], hi = mags[size_t(code)];
    if (ax - lo < hi - ax || (ax - lo == hi - ax && (code - 1) % 2 == 0)) --code;
  }
  return uint8_t(code | (x < 0 ? 0x80 : 0));
}

std::optional<GqFormat> gq_format(DType t) {
  for (const Entry& e : kFormats)
    if (e.t == t) return e.f;
  return std::nullopt;
}

DType gq_dtype(GqFormat f) {
  for (const Entry& e : kFormats)
    if (e.f.kind == f.kind && e.f.group == f.group) return e.t;
  fail("no GQ layout for {}-bit weights in groups of {}", f.bits(), f.group);
}

bool gq_row_ok(GqFormat f, int64_t K) {
  return K > 0 && K % 32 == 0 && (f.group == 0 || K % f.group == 0);
}

void dequantize_row_gq(GqFormat f, const void* src, float* dst, int64_t K) {
  const auto* codes = static_cast<const uint8_t*>(src);
  const auto* params = params_of(f, const_cast<void*>(src), K);
  const int64_t G = f.group_size(K);
  for (int64_t k = 0; k < K; ++k) {
    const float s = f16_to_f32(params[2 * (k / G)]), m = f16_to_f32(params[2 * (k / G) + 1]);
    float q;
    if (f.kind == GqKind::Int4) {
      const int64_t w = k / 8, i = k % 8;
      uint32_t word;
      std::memcpy(&word, codes + 4 * w, 4);
      q = float((word >> ((i % 2) * 16 + (i / 2) * 4)) & 15);
    } else if (f.kind == GqKind::Int8) {
      q = float(int(codes[k]) - 128);
    } else {
      q = e4m3_to_f32(codes[k]);
    }
    dst[k] = s * q + m;
  }
}

void pack_row_gq(GqFormat f, const int32_t* codes, const float* scales, const float* offsets,
                 void* dst, int64_t K) {
  LL_CHECK(gq_row_ok(f, K), "a row of {} weights does not fit groups of {}", K, f.group_size(K));
  auto* out = static_cast<uint8_t*>(dst);
  std::memset(dst, 0, f.row_bytes(K));
  if (f.kind == GqKind::Int4) {
    for (int64_t k = 0; k < K; ++k) {
      const uint32_t q = uint32_t(std::clamp(codes[k], 0, 15));
      const int64_t w = k / 8, i = k % 8;
      uint32_t word;
      std::memcpy(&word, out + 4 * w, 4);
      word |= q << ((i % 2) * 16 + (i / 2) * 4);
      std::memcpy(out + 4 * w, &word, 4);
    }
  } else if (f.kind == GqKind::Int8) {
    for (int64_t k = 0; k < K; ++k) out[k] = uint8_t(std::clamp(codes[k], -128, 127) + 128);
  } else {  // fp8: the e4m3 bit patterns themselves
    for (int64_t k = 0; k < K; ++k) out[k] = uint8_t(codes[k] & 0xFF);
  }
  uint16_t* params = params_of(f, dst, K);
  for (int64_t g = 0; g < f.groups(K); ++g) {
    params[2 * g] = f32_to_f16(scales[g]);
    params[2 * g + 1] = f32_to_f16(offsets ? offsets[g] : 0.f);
  }
}

void quantize_row_gq(GqFormat f, const float* x, void* dst, int64_t K) {
  LL_CHECK(gq_row_ok(f, K), "a row of {} weights does not fit groups of {}", K, f.group_size(K));
  const int64_t G = f.group_size(K), ng = f.groups(K);
  if (f.kind == GqKind::Fp8) {
    std::memset(dst, 0, f.row_bytes(K));
    auto* out = static_cast<uint8_t*>(dst);
    uint16_t* params = params_of(f, dst, K);
    for (int64_t g = 0; g < ng; ++g) {
      float amax = 0;
      for (int64_t k = g * G; k < (g + 1) * G; ++k) amax = std::max(amax, std::fabs(x[k]));
      const float s = f16_to_f32(f32_to_f16(amax / 448.f));
      for (int64_t k = g * G; k < (g + 1) * G; ++k) out[k] = s > 0 ? f32_to_e4m3(x[k] / s) : 0;
      params[2 * g] = f32_to_f16(s);
      params[2 * g + 1] = 0;
    }
    return;
  }
  std::vector<int32_t> codes(static_cast<size_t>(K));
  std::vector<float> scales(static_cast<size_t>(ng)), offsets(static_cast<size_t>(ng));
  for (int64_t g = 0; g < ng; ++g) {
    const float* xg = x + g * G;
    float s, m;
    if (f.kind == GqKind::Int8) {
      float amax = 0;
      for (int64_t k = 0; k < G; ++k) amax = std::max(amax, std::fabs(xg[k]));
      s = f16_to_f32(f32_to_f16(amax / 127.f));
      m = 0;
      for (int64_t k = 0; k < G; ++k)
        codes[size_t(g * G + k)] = s > 0 ? int32_t(std::lround(std::clamp(xg[k] / s, -127.f, 127.f))) : 0;
    } else {
      float lo = xg[0], hi = xg[0];
      for (int64_t k = 1; k < G; ++k) lo = std::min(lo, xg[k]), hi = std::max(hi, xg[k]);
      s = f16_to_f32(f32_to_f16((hi - lo) / 15.f));
      m = f16_to_f32(f32_to_f16(lo));
      for (int64_t k = 0; k < G; ++k)
        codes[size_t(g * G + k)] = s > 0 ? int32_t(std::lround(std::clamp((xg[k] - m) / s, 0.f, 15.f))) : 0;
    }
    scales[size_t(g)] = s;
    offsets[size_t(g)] = m;
  }
  pack_row_gq(f, codes.data(), scales.data(), offsets.data(), dst, K);
}

std::optional<GqFormat> gq_for_gguf(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q5_K: case DType::Q5_0: case DType::Q5_1: return GqFormat{GqKind::Int8, 32};
    case DType::Q6_K: return GqFormat{GqKind::Int8, 16};
    case DType::Q4_0: case DType::Q4_1: case DType::Q4_K: return GqFormat{GqKind::Int4, 32};
    default: return std::nullopt;
  }
}

void repack_gguf_row(DType t, const void* src, void* dst, int64_t K) {
  const auto f = gq_for_gguf(t);
  LL_CHECK(f.has_value(), "GGUF type {} has no GQ repacking", dtype_name(t));
  const int64_t G = f->group, ng = K / G;
  std::vector<float> s(static_cast<size_t>(ng)), m(size_t(ng), 0.f);
  const auto* in = static_cast<const uint8_t*>(src);
  // Per-group scale and offset as the block stores them (weight = s * code + m).
  for (int64_t g = 0; g < ng; ++g) {
    switch (t) {
      case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: case DType::Q4_1: case DType::Q5_1: {
        // Each 32-weight block starts with its fp16 scale d (then, for *_1, its offset m).
        uint16_t h[2];
        std::memcpy(h, in + size_t(g) * dtype_info(t).block_bytes, 4);
        const float d = f16_to_f32(h[0]);
        s[size_t(g)] = d;
        m[size_t(g)] = t == DType::Q4_1 || t == DType::Q5_1 ? f16_to_f32(h[1])
                       : t == DType::Q4_0                   ? -8.f * d
                       : t == DType::Q5_0                   ? -16.f * d
                                                            : 0.f;
        break;
      }
      case DType::Q4_K: case DType::Q5_K: {
        const size_t bb = t == DType::Q4_K ? sizeof(BlockQ4_K) : sizeof(BlockQ5_K);
        const auto& b = *reinterpret_cast<const BlockQ4_K*>(in + size_t(g / 8) * bb);  // same head
        uint8_t sc, mn;
        scale_min_k4(int(g % 8), b.scales, &sc, &mn);
        s[size_t(g)] = f16_to_f32(b.d) * sc, m[size_t(g)] = -f16_to_f32(b.dmin) * mn;
        break;
      }
      case DType::Q6_K: {
        const auto& b = reinterpret_cast<const BlockQ6_K*>(in)[g / 16];
        s[size_t(g)] = f16_to_f32(b.d) * b.scales[g % 16];
        break;
      }
      default: break;
    }
  }
  // Codes from the exact dequantised values: (w - m) / s is an integer up to float rounding.
  std::vector<float> w(static_cast<size_t>(K));
  dequantize_row(t, src, w.data(), K);
  std::vector<int32_t> codes(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    const float sg = s[size_t(k / G)];
    codes[size_t(k)] = sg != 0 ? int32_t(std::lround((w[size_t(k)] - m[size_t(k / G)]) / sg)) : 0;
  }
  if (t == DType::Q5_K || t == DType::Q5_0 || t == DType::Q5_1) center_codes(codes.data(), s.data(), m.data(), K, G, 16);
  pack_row_gq(*f, codes.data(), s.data(), m.data(), dst, K);
}

namespace {

std::optional<GqFormat> natural_format(DType t) {
  if (auto f = gq_format(t)) return f;
  return gq_for_gguf(t);
}

// Codes and per-group params of a GQ row (Int8 codes signed, Int4 0..15).
void unpack_row_gq(GqFormat f, const void* src, int32_t* codes, float* s, float* m, int64_t K) {
  const auto* c = static_cast<const uint8_t*>(src);
  for (int64_t k = 0; k < K; ++k) {
    if (f.kind == GqKind::Int4) {
      uint32_t word;
      std::memcpy(&word, c + 4 * (k / 8), 4);
      const int64_t i = k % 8;
      codes[k] = int32_t((word >> ((i % 2) * 16 + (i / 2) * 4)) & 15);
    } else {
      codes[k] = int32_t(c[k]) - 128;
    }
  }
  const auto* p = reinterpret_cast<const uint16_t*>(c + f.code_bytes(K));
  for (int64_t g = 0; g < f.groups(K); ++g) s[g] = f16_to_f32(p[2 * g]), m[g] = f16_to_f32(p[2 * g + 1]);
}

}  // namespace

std::optional<GqFormat> gq_common_format(const std::vector<DType>& types) {
  std::optional<GqFormat> out;
  for (DType t : types) {
    const auto f = natural_format(t);
    if (!f) return std::nullopt;
    if (!out) {
      out = f;
      continue;
    }
    if ((f->kind == GqKind::Fp8) != (out->kind == GqKind::Fp8)) return std::nullopt;
    if (f->kind == GqKind::Int8) out->kind = GqKind::Int8;
    if (out->group == 0 || (f->group != 0 && f->group < out->group)) out->group = f->group;
  }
  return out;
}

void to_gq_row(DType t, const void* src, GqFormat f, void* dst, int64_t K) {
  const auto from = natural_format(t);
  LL_CHECK(from.has_value(), "type {} has no GQ form", dtype_name(t));
  if (from->kind == f.kind && from->group == f.group) {
    if (is_gq(t)) std::memcpy(dst, src, f.row_bytes(K));
    else repack_gguf_row(t, src, dst, K);
    return;
  }
  LL_CHECK(from->kind != GqKind::Fp8 && f.kind != GqKind::Fp8 &&
               (from->kind == f.kind || f.kind == GqKind::Int8) && from->group_size(K) % f.group_size(K) == 0,
           "cannot hold {} rows in the {}-bit / group {} layout exactly", dtype_name(t), f.bits(), f.group);
  std::vector<uint8_t> tmp;
  if (!is_gq(t)) {
    tmp.resize(from->row_bytes(K));
    repack_gguf_row(t, src, tmp.data(), K);
    src = tmp.data();
  }
  const int64_t ng = from->groups(K), nf = f.groups(K);
  std::vector<int32_t> codes(static_cast<size_t>(K));
  std::vector<float> s(static_cast<size_t>(ng)), m(static_cast<size_t>(ng));
  unpack_row_gq(*from, src, codes.data(), s.data(), m.data(), K);
  std::vector<float> fs(static_cast<size_t>(nf)), fm(static_cast<size_t>(nf));
  const int64_t ratio = nf / ng;
  for (int64_t g = 0; g < nf; ++g) fs[size_t(g)] = s[size_t(g / ratio)], fm[size_t(g)] = m[size_t(g / ratio)];
  if (from->kind == GqKind::Int4) center_codes(codes.data(), fs.data(), fm.data(), K, f.group_size(K), 8);
  pack_row_gq(f, codes.data(), fs.data(), fm.data(), dst, K);
}

}  // namespace lite_llama
