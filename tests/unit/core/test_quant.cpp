// Block (de)quantisation: hand-built blocks with hand-computed values, round-trip error bounds
// derived from each format's rounding, and the K-quants against the `gguf` package's numpy
// decoder (tests/fixtures/quant/dequant.txt, from scripts/fixtures/make_quant_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/quant.h"

using namespace lite_llama;

namespace {

constexpr uint16_t kF16Half = 0x3800;      // 0.5
constexpr uint16_t kF16MinusTwo = 0xc000;  // -2
constexpr uint16_t kF16Quarter = 0x3400;   // 0.25
constexpr uint16_t kF16MinusOne = 0xbc00;  // -1
constexpr uint16_t kF16Eighth = 0x3000;    // 0.125

}  // namespace

TEST(Quant, DequantQ4_0HandBlocks) {
  // Byte j holds element j in its low nibble and element j+16 in its high nibble; value
  // (nibble - 8) * d. Block 0: nibbles j and 15-j with d = 0.5; block 1: the same with d = -2.
  BlockQ4_0 b[2];
  b[0].d = kF16Half;
  b[1].d = kF16MinusTwo;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = b[1].qs[j] = uint8_t(j | ((15 - j) << 4));
  std::vector<float> y(64);
  dequantize_row(DType::Q4_0, b, y.data(), 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[size_t(j)], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[size_t(j + 16)], (7 - j) * 0.5f) << j;
    EXPECT_EQ(y[size_t(32 + j)], (j - 8) * -2.0f) << j;
    EXPECT_EQ(y[size_t(48 + j)], (7 - j) * -2.0f) << j;
  }
  EXPECT_EQ(y[0], -4.0f);   // nibble 0 -> -8 * 0.5
  EXPECT_EQ(y[16], 3.5f);   // nibble 15 -> 7 * 0.5
  EXPECT_EQ(y[32], 16.0f);  // nibble 0 -> -8 * -2
}

TEST(Quant, DequantQ4_1HandBlock) {
  // value = nibble * d + m with d = 0.25, m = -1: nibble 0 -> -1, nibble 15 -> 2.75.
  BlockQ4_1 b;
  b.d = kF16Quarter;
  b.m = kF16MinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  std::vector<float> y(32);
  dequantize_row(DType::Q4_1, &b, y.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[size_t(j)], j * 0.25f - 1.0f) << j;
    EXPECT_EQ(y[size_t(j + 16)], (15 - j) * 0.25f - 1.0f) << j;
  }
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[16], 2.75f);
}

TEST(Quant, DequantQ8_0HandBlock) {
  // value = q * d with d = 0.125 and q = 8j - 128 (-128 .. 120).
  BlockQ8_0 b;
  b.d = kF16Eighth;
  for (int j = 0; j < 32; ++j) b.qs[j] = int8_t(8 * j - 128);
  std::vector<float> y(32);
  dequantize_row(DType::Q8_0, &b, y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[size_t(j)], (8 * j - 128) * 0.125f) << j;
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[31], 15.0f);
}

TEST(Quant, DequantF16AndBf16KnownBits) {
  // IEEE binary16: 1, -2, 1/3 rounded (0x3555 = 0.333251953125), 65504, 2^-24, -0.
  const uint16_t h[6] = {0x3c00, 0xc000, 0x3555, 0x7bff, 0x0001, 0x8000};
  float y[6];
  dequantize_row(DType::F16, h, y, 6);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 0.333251953125f);
  EXPECT_EQ(y[3], 65504.0f);
  EXPECT_EQ(y[4], std::ldexp(1.0f, -24));
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_TRUE(std::signbit(y[5]));
  // bfloat16 = the top half of an fp32: 0x3f80 = 1, 0xc040 = -3, 0x4049 = 3.140625.
  const uint16_t b[3] = {0x3f80, 0xc040, 0x4049};
  dequantize_row(DType::BF16, b, y, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_EQ(y[2], 3.140625f);
  // F32 is a copy.
  const float f[3] = {1.5f, -0.0f, 1e-30f};
  dequantize_row(DType::F32, f, y, 3);
  EXPECT_EQ(std::memcmp(f, y, sizeof f), 0);
}

namespace {

std::vector<float> random_row(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(rng);
  return x;
}

}  // namespace

// Bounds per 32-element block (fp16 relative error is at most u = 2^-11):
//  Q8_0: d = amax/127 stored as fp16, q = round(x/d), |q| <= 127:
//        |x - q*d16| <= d/2 + 127*d*u            (rounding + scale storage)
//  Q4_0: d = -max/8, q = min(15, floor(x/d + 8.5)): rounding gives d/2; the clamp only bites for
//        x/d in (7.5, 8], i.e. error <= |d|; |q-8| <= 8: |x - deq| <= |d| + 8|d|u
//  Q4_1: d = (hi-lo)/15, m = fp16(lo): d/2 + 15*d*u + |lo|*u
//  F16/BF16: relative 2^-11 / 2^-8 (round to nearest) for normal values.
// Scales stay >= 0.05 so that the fp16 block scales are normal numbers (u applies).
TEST(Quant, RoundTripErrorBounds) {
  std::mt19937 rng(1234);
  constexpr float u = 1.0f / 2048;
  for (float scale : {0.05f, 1.0f, 50.0f}) {
    const int64_t n = 32 * 16;
    std::vector<float> x = random_row(rng, n, scale);
    if (scale == 1.0f) std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
    std::vector<float> y(static_cast<size_t>(n));
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::F16, DType::BF16}) {
      std::vector<uint8_t> q(row_bytes(t, n));
      quantize_row(t, x.data(), q.data(), n);
      dequantize_row(t, q.data(), y.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        const float* xb = x.data() + b * 32;
        float amax = 0, lo = xb[0], hi = xb[0];
        for (int j = 0; j < 32; ++j)
          amax = std::max(amax, std::fabs(xb[j])), lo = std::min(lo, xb[j]),
          hi = std::max(hi, xb[j]);
        for (int j = 0; j < 32; ++j) {
          const float xv = xb[j], yv = y[size_t(b * 32 + j)];
          float bound = 0;
          switch (t) {
            case DType::Q8_0:
              bound = (amax / 127) * (0.5f + 127 * u);
              break;
            case DType::Q4_0:
              bound = (amax / 8) * (1.0f + 8 * u);
              break;
            case DType::Q4_1:
              bound = ((hi - lo) / 15) * (0.5f + 15 * u) + std::fabs(lo) * u;
              break;
            // fp16 subnormals (|x| < 2^-14) have an absolute spacing of 2^-24.
            case DType::F16:
              bound = std::max(std::fabs(xv) * u, std::ldexp(1.0f, -25));
              break;
            default:
              bound = std::fabs(xv) / 256;
              break;
          }
          EXPECT_LE(std::fabs(xv - yv), bound * 1.0001f + 1e-30f)
              << dtype_name(t) << " scale " << scale << " block " << b << " elem " << j;
        }
      }
    }
  }
}

TEST(Quant, Q4_0RoundingIsHalfStepAwayFromClamp) {
  // Away from the clamp the Q4_0 error is at most d/2: x/d = k +- 0.49 must decode to k*d.
  // Block: max = -8 (so d = 1 exactly), other values k + 0.49 * sign.
  float x[32];
  x[0] = -8.0f;
  for (int j = 1; j < 32; ++j) x[j] = float((j % 15) - 7) + ((j & 1) ? 0.49f : -0.49f);
  BlockQ4_0 b;
  quantize_row_q4_0(x, &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  float y[32];
  dequantize_row(DType::Q4_0, &b, y, 32);
  EXPECT_EQ(y[0], -8.0f);
  for (int j = 1; j < 32; ++j) EXPECT_EQ(y[j], float((j % 15) - 7)) << j;
}

TEST(Quant, Q8_0ExactOnGrid) {
  // Values that are multiples of amax/127 with an fp16-exact scale come back exactly:
  // amax = 127 -> d = 1.
  float x[32], y[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j * 8 - 127);
  x[31] = 127;
  BlockQ8_0 b;
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  dequantize_row(DType::Q8_0, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << j;
}

TEST(Quant, Q8_1ActivationBlocks) {
  // s must equal d * sum(qs); qs = round(x * 127 / amax).
  std::mt19937 rng(7);
  std::vector<float> x = random_row(rng, 64, 2.0f);
  BlockQ8_1 b[2];
  quantize_row_q8_1(x.data(), b, 64);
  for (int i = 0; i < 2; ++i) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(i * 32 + j)]));
    EXPECT_FLOAT_EQ(b[i].d, amax / 127);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const float xv = x[size_t(i * 32 + j)];
      // Round to nearest: within half a step of x * 127 / amax (ties may go either way).
      EXPECT_LE(std::fabs(b[i].qs[j] - xv * 127 / amax), 0.5001f) << j;
      EXPECT_LE(std::fabs(b[i].qs[j] * b[i].d - xv), b[i].d * 0.5001f) << j;
      sum += b[i].qs[j];
    }
    EXPECT_FLOAT_EQ(b[i].s, b[i].d * float(sum));
  }
}

namespace {

struct Record {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

std::map<std::string, Record> load_fixture() {
  std::map<std::string, Record> out;
  const std::string path = std::string(LL_SOURCE_DIR) + "/tests/fixtures/quant/dequant.txt";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "missing " << path;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream head(line);
    std::string name;
    size_t n = 0, nbytes = 0;
    head >> name >> n >> nbytes;
    std::string hex, vals;
    std::getline(f, hex);
    std::getline(f, vals);
    Record r;
    EXPECT_EQ(hex.size(), 2 * nbytes) << name;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      r.bytes.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
    std::istringstream vs(vals);
    float v;
    while (vs >> v) r.values.push_back(v);
    EXPECT_EQ(r.values.size(), n) << name;
    out[name] = std::move(r);
  }
  return out;
}

}  // namespace

TEST(Quant, DequantMatchesGgufReference) {
  const auto fx = load_fixture();
  const std::pair<const char*, DType> types[] = {{"Q4_0", DType::Q4_0}, {"Q4_1", DType::Q4_1},
                                                 {"Q8_0", DType::Q8_0}, {"Q4_K", DType::Q4_K},
                                                 {"Q5_K", DType::Q5_K}, {"Q6_K", DType::Q6_K},
                                                 {"Q5_0", DType::Q5_0}, {"Q5_1", DType::Q5_1}};
  for (const auto& [name, t] : types) {
    SCOPED_TRACE(name);
    auto it = fx.find(name);
    ASSERT_NE(it, fx.end()) << "fixture lacks " << name;
    const Record& r = it->second;
    const int64_t n = int64_t(r.values.size());
    ASSERT_EQ(r.bytes.size(), row_bytes(t, n));
    std::vector<float> y(static_cast<size_t>(n), NAN);
    dequantize_row(t, r.bytes.data(), y.data(), n);
    // numpy multiplies in fp32 as ggml does; a compiler may fuse d*q - m into one FMA, which
    // differs by at most an ulp of the larger term. 1e-6 of the row's magnitude covers that,
    // while a wrong scale, bit or nibble moves values by whole quantisation steps.
    float mag = 0;
    for (float v : r.values) mag = std::max(mag, std::fabs(v));
    int bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (!(std::fabs(y[size_t(i)] - r.values[size_t(i)]) <= 1e-6f * mag) && bad++ < 8)
        ADD_FAILURE() << "element " << i << " (block " << i / dtype_info(t).block_size << "): got "
                      << y[size_t(i)] << ", gguf gives " << r.values[size_t(i)];
    EXPECT_EQ(bad, 0);
  }
}
