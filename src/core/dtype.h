// Element and block types. Numbering follows ggml's type ids so GGUF tensor types map 1:1.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lite_llama {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  // Not GGUF types: the GPU's quantised weight layouts (core/gq.h), made at load time.
  GQ8 = 200,      // int8, one scale per row (per output channel)
  GQ8_G16 = 201,  // int8 with per-16 scale/offset (GGUF Q6_K)
  GQ8_G32 = 202,  // int8 with per-32 scale/offset (GGUF Q8_0, Q5_K)
  GQ4_G32 = 210,  // int4 with per-32 scale/offset (GGUF Q4_0, Q4_1, Q4_K)
  GQ4_G64 = 211,
  GQ4_G128 = 212,  // int4 group 128 (--quantize int4, GPTQ, AWQ)
  GQ4 = 213,       // int4, one scale/offset per row
  GF8 = 220,       // fp8 e4m3, one scale per row
  GF8_G128 = 221,  // fp8 e4m3, a scale per 128 (the Qwen3-*-FP8 128 x 128 blocks)
  F8_E4M3 = 230,   // raw e4m3 elements (safetensors F8_E4M3), converted at load
};
// ids from here on are this engine's own, never valid in a GGUF file
constexpr uint32_t kFirstOwnDType = 200;

struct DTypeInfo {
  std::string_view name;
  int block_size;     // elements per block (1 for plain types)
  size_t block_bytes; // bytes per block
  bool supported;     // this engine can compute with it
};

// Returns nullptr for an id no engine knows.
const DTypeInfo* dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
inline bool is_quantized(DType t) { return dtype_info(t).block_size > 1; }

// Bytes of a row of n elements; n must be a multiple of the block size.
size_t row_bytes(DType t, int64_t n);

// Quantised block layouts (identical to ggml's so GGUF data is used in place).
constexpr int kQK = 32;  // elements per Q4_0/Q4_1/Q8_0/Q8_1 block
struct BlockQ4_0 {
  uint16_t d;              // fp16 scale
  uint8_t qs[kQK / 2];     // nibbles: element j in low half of byte j, j+16 in high half
};
struct BlockQ4_1 {
  uint16_t d, m;           // fp16 scale and min
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];        // bit j: the 5th bit of element j
  uint8_t qs[kQK / 2];  // low nibbles as Q4_0
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// Activation block for integer dot products: s = d * sum(qs).
struct BlockQ8_1 {
  float d, s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);

constexpr int kQK_K = 256;  // super-block of the K-quants
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

}  // namespace lite_llama
