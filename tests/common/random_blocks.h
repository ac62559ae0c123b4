// Random GGUF block rows for tests: random bytes reach every code and 6-bit sub-scale of every
// block type; only the fp16 super-scales are set to finite values of a realistic size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"

namespace lite_llama::testing {

inline std::vector<uint8_t> random_gguf_rows(DType t, int64_t rows, int64_t K, std::mt19937& rng) {
  std::vector<uint8_t> b(row_bytes(t, K) * size_t(rows));
  for (auto& x : b) x = uint8_t(rng());
  std::uniform_real_distribution<float> u(0.001f, 0.05f);
  auto set = [&](size_t off) {
    const uint16_t h = f32_to_f16(u(rng));
    std::memcpy(&b[off], &h, 2);
  };
  const size_t bb = dtype_info(t).block_bytes;
  for (size_t o = 0; o < b.size(); o += bb) {
    switch (t) {
      case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: set(o); break;
      case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: set(o), set(o + 2); break;
      case DType::Q6_K: set(o + offsetof(BlockQ6_K, d)); break;
      default: break;
    }
  }
  return b;
}

}  // namespace lite_llama::testing
