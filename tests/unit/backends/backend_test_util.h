// Helpers shared by the CPU backend tests: random data, weight encoding, error bounds.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/quant.h"
#include "core/tensor.h"

namespace lite_llama::test {

constexpr double kU = 1.0 / (1 << 24);  // fp32 unit roundoff

inline std::vector<float> randn(std::mt19937& rng, size_t n, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A weight matrix [rows, K] in type t, made from random floats with the engine's quantisers
// (their accuracy is checked in test_quant; here only the stored bytes matter, and the
// reference decodes those same bytes).
struct Weight {
  DType dtype;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  Tensor tensor() { return Tensor(bytes.data(), dtype, {rows, cols}); }
  // The dequantised values, as the reference sees them.
  std::vector<float> values() const {
    std::vector<float> out(size_t(rows * cols));
    const size_t rb = row_bytes(dtype, cols);
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(dtype, bytes.data() + size_t(r) * rb, out.data() + r * cols, cols);
    return out;
  }
};

inline Weight make_weight(std::mt19937& rng, DType t, int64_t rows, int64_t cols, float sd = 0.5f) {
  Weight w{t, rows, cols, {}};
  const size_t rb = row_bytes(t, cols);
  w.bytes.resize(rb * size_t(rows));
  std::vector<float> src = randn(rng, size_t(rows * cols), sd);
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(t, src.data() + r * cols, w.bytes.data() + size_t(r) * rb, cols);
  return w;
}

// Random K-quant blocks: random bytes with finite fp16 scales written at the formats' offsets.
inline std::vector<uint8_t> random_kquant_row(std::mt19937& rng, DType t, int64_t n) {
  const auto& info = dtype_info(t);
  std::vector<uint8_t> b(row_bytes(t, n));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& x : b) x = uint8_t(byte(rng));
  std::vector<size_t> fp16_offsets;
  if (t == DType::Q4_K || t == DType::Q5_K) fp16_offsets = {0, 2};
  if (t == DType::Q6_K) fp16_offsets = {208};
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  for (size_t blk = 0; blk < b.size() / info.block_bytes; ++blk)
    for (size_t off : fp16_offsets) {
      uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(&b[blk * info.block_bytes + off], &h, 2);
    }
  return b;
}

}  // namespace lite_llama::test
