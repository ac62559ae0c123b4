// The GQ weight layout (core/gq.h) on the CPU: the documented bit layout from hand-set codes,
// quantiser error bounds, exact GGUF repacking (random blocks of every repackable type against
// dequantize_row of the GGUF block), exact widening between layouts, and the format rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/gq.h"
#include "core/half.h"
#include "core/quant.h"
#include "common/random_blocks.h"

using namespace lite_llama;
using lite_llama::testing::random_gguf_rows;

namespace {

std::vector<float> dequant(DType t, const std::vector<uint8_t>& row, int64_t K) {
  std::vector<float> y(static_cast<size_t>(K));
  dequantize_row(t, row.data(), y.data(), K);
  return y;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

}  // namespace

TEST(Gq, Int4BitLayoutAndValues) {
  // Weight 2i of each 8-weight word at bits 4i, weight 2i+1 at bits 16 + 4i.
  const GqFormat f{GqKind::Int4, 32};
  const int64_t K = 64;
  std::vector<int32_t> codes(K);
  for (int64_t k = 0; k < K; ++k) codes[size_t(k)] = int32_t(k % 16);
  const float s[2] = {0.5f, -2.f}, m[2] = {1.f, 0.25f};
  std::vector<uint8_t> row(f.row_bytes(K));
  ASSERT_EQ(row.size(), size_t(32 + 16));
  pack_row_gq(f, codes.data(), s, m, row.data(), K);
  uint32_t w0;
  std::memcpy(&w0, row.data(), 4);
  // codes 0..7 -> word: 0 | 2<<4 | 4<<8 | 6<<12 | 1<<16 | 3<<20 | 5<<24 | 7<<28
  EXPECT_EQ(w0, 0x75316420u);
  uint16_t p[4];
  std::memcpy(p, row.data() + 32, 8);
  EXPECT_EQ(f16_to_f32(p[0]), 0.5f);
  EXPECT_EQ(f16_to_f32(p[1]), 1.f);
  EXPECT_EQ(f16_to_f32(p[2]), -2.f);
  const std::vector<float> y = dequant(DType::GQ4_G32, row, K);
  for (int64_t k = 0; k < K; ++k) EXPECT_EQ(y[size_t(k)], s[k / 32] * float(k % 16) + m[k / 32]) << k;
}

TEST(Gq, Int8AndFp8Values) {
  const int64_t K = 32;
  std::vector<int32_t> codes(K);
  for (int64_t k = 0; k < K; ++k) codes[size_t(k)] = int32_t(k * 8 - 128);
  const float s = 0.25f;
  std::vector<uint8_t> row(GqFormat{GqKind::Int8, 0}.row_bytes(K));
  ASSERT_EQ(row.size(), size_t(32 + 16));
  pack_row_gq({GqKind::Int8, 0}, codes.data(), &s, nullptr, row.data(), K);
  EXPECT_EQ(row[0], 0);    // code -128 stored as 0
  EXPECT_EQ(row[16], 128); // code 0
  const std::vector<float> y = dequant(DType::GQ8, row, K);
  for (int64_t k = 0; k < K; ++k) EXPECT_EQ(y[size_t(k)], 0.25f * float(k * 8 - 128));
  // e4m3: 0x38 = 1.0, 0x7E = 448 (largest finite), 0x01 = 2^-9 (smallest subnormal), 0xC0 = -2.
  std::vector<uint8_t> f8(GqFormat{GqKind::Fp8, 0}.row_bytes(K), 0);
  f8[0] = 0x38, f8[1] = 0x7E, f8[2] = 0x01, f8[3] = 0xC0;
  const uint16_t sc = f32_to_f16(0.5f);
  std::memcpy(&f8[32], &sc, 2);
  const std::vector<float> z = dequant(DType::GF8, f8, K);
  EXPECT_EQ(z[0], 0.5f);
  EXPECT_EQ(z[1], 224.f);
  EXPECT_EQ(z[2], 0.5f * std::ldexp(1.f, -9));
  EXPECT_EQ(z[3], -1.f);
}

TEST(Gq, QuantiserErrorBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 0.02f);
  const int64_t K = 512;
  std::vector<float> x(static_cast<size_t>(K));
  for (auto& v : x) v = nd(rng);
  const double amax = max_abs(x);
  struct Case {
    DType t;
    double bound;  // max |error| allowed
  } cases[] = {
      {DType::GQ8, amax / 127 * 0.5 * 1.01},      // half a step of the per-row scale
      {DType::GQ8_G32, amax / 127 * 0.5 * 1.01},  // group scales are no larger
      {DType::GQ4_G128, amax * 2 / 15 * 0.5 * 1.02},  // half a step of (max - min) / 15
      {DType::GQ4_G32, amax * 2 / 15 * 0.5 * 1.02},
      {DType::GF8, amax * 0.0625 * 1.01},  // e4m3: 3 mantissa bits, relative step 2^-3, half of it
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> row(row_bytes(c.t, K));
    quantize_row(c.t, x.data(), row.data(), K);
    const std::vector<float> y = dequant(c.t, row, K);
    double err = 0;
    for (int64_t k = 0; k < K; ++k) err = std::max(err, double(std::fabs(y[size_t(k)] - x[size_t(k)])));
    EXPECT_LE(err, c.bound) << dtype_name(c.t);
    EXPECT_GT(err, 0) << dtype_name(c.t);
  }
}

TEST(Gq, GgufRepackMatchesBlocks) {
  std::mt19937 rng(11);
  const int64_t K = 512;
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q5_0,
                  DType::Q5_1}) {
    const auto f = gq_for_gguf(t);
    ASSERT_TRUE(f.has_value()) << dtype_name(t);
    for (int rep = 0; rep < 20; ++rep) {
      const std::vector<uint8_t> src = random_gguf_rows(t, 1, K, rng);
      const std::vector<float> want = dequant(t, src, K);
      std::vector<uint8_t> dst(f->row_bytes(K));
      repack_gguf_row(t, src.data(), dst.data(), K);
      const std::vector<float> got = dequant(gq_dtype(*f), dst, K);
      // Exact up to the fp16 rounding of the K-quants' d * sc and dmin * m: 2^-11 of each
      // term of s * code + m (the terms may cancel, so not of the weight itself).
      const auto* params = reinterpret_cast<const uint16_t*>(dst.data() + f->code_bytes(K));
      for (int64_t k = 0; k < K; ++k) {
        const double m = std::fabs(f16_to_f32(params[2 * (k / f->group) + 1]));
        ASSERT_NEAR(got[size_t(k)], want[size_t(k)], 1e-3 * (std::fabs(want[size_t(k)]) + 2 * m) + 1e-6)
            << dtype_name(t) << " weight " << k;
      }
    }
  }
}

TEST(Gq, WideningKeepsValues) {
  std::mt19937 rng(3);
  const int64_t K = 256;
  // Q4_K (int4 / 32) and Q6_K (int8 / 16) parts fused: the common layout is int8 / 16.
  const auto common = gq_common_format({DType::Q4_K, DType::Q6_K});
  ASSERT_TRUE(common.has_value());
  EXPECT_EQ(common->kind, GqKind::Int8);
  EXPECT_EQ(common->group, 16);
  for (DType t : {DType::Q4_K, DType::Q4_0, DType::Q8_0, DType::Q6_K}) {
    const std::vector<uint8_t> src = random_gguf_rows(t, 1, K, rng);
    std::vector<uint8_t> nat(gq_for_gguf(t)->row_bytes(K)), wide(common->row_bytes(K));
    repack_gguf_row(t, src.data(), nat.data(), K);
    to_gq_row(t, src.data(), *common, wide.data(), K);
    // Int4 codes are re-centred in int8 (offset m + 8 s, rounded to fp16): exact up to that.
    const std::vector<float> a = dequant(gq_dtype(*gq_for_gguf(t)), nat, K), b = dequant(gq_dtype(*common), wide, K);
    for (int64_t k = 0; k < K; ++k) {
      if (gq_for_gguf(t)->kind == GqKind::Int8) ASSERT_EQ(a[size_t(k)], b[size_t(k)]) << dtype_name(t) << " " << k;
      else {
        const auto* p = reinterpret_cast<const uint16_t*>(wide.data() + common->code_bytes(K));
        const double m = std::fabs(f16_to_f32(p[2 * (k / 16) + 1]));
        ASSERT_NEAR(a[size_t(k)], b[size_t(k)], 1e-3 * (std::fabs(a[size_t(k)]) + m) + 1e-6) << dtype_name(t) << " " << k;
      }
    }
  }
}

TEST(Gq, FormatRules) {
  EXPECT_FALSE(gq_common_format({DType::Q4_K, DType::F16}).has_value());  // unquantised part
  EXPECT_FALSE(gq_common_format({DType::GF8, DType::Q8_0}).has_value());  // fp8 with integers
  EXPECT_EQ(gq_common_format({DType::GQ4_G128, DType::GQ4_G128})->group, 128);
  EXPECT_EQ(gq_common_format({DType::GQ4, DType::GQ4_G64})->group, 64);
  EXPECT_FALSE(gq_row_ok({GqKind::Int4, 128}, 576));  // SmolLM2's hidden size: not a multiple
  EXPECT_TRUE(gq_row_ok({GqKind::Int4, 64}, 576));
  EXPECT_FALSE(gq_row_ok({GqKind::Int8, 0}, 40));  // codes must fill 16-byte chunks
  EXPECT_EQ(row_bytes(DType::GQ4_G128, 4096), size_t(2048 + 128));
  EXPECT_EQ(row_bytes(DType::GQ8, 4096), size_t(4096 + 16));
  EXPECT_THROW(parse_quant_mode("int3"), std::exception);
  EXPECT_EQ(parse_quant_mode("int4"), QuantMode::Int4);
}

TEST(BackendOptions, ActivationTypeDefaultsToAuto) {
  EXPECT_EQ(BackendOptions{}.dtype, ActType::Auto);  // chosen at load by a calibration forward
  EXPECT_EQ(parse_act_type("auto"), ActType::Auto);
  EXPECT_EQ(parse_act_type("fp16"), ActType::FP16);
  EXPECT_EQ(parse_act_type("bf16"), ActType::BF16);
  EXPECT_THROW(parse_act_type("fp32"), std::exception);
  EXPECT_STREQ(act_type_name(ActType::Auto), "auto");
  EXPECT_TRUE(BackendOptions{}.cuda.fp32_residual);
}
