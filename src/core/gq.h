// GQ: the GPU's quantised weight layout, shared by every scheme (int8, int4, fp8, GGUF repacks,
// GPTQ/AWQ). A row of K weights is [codes | group params]:
//   codes   K bytes (8-bit: int8 code + 128, or e4m3) or K/2 bytes (4-bit, 0..15; each 32-bit
//           word holds 8 weights, weight 2i at bits 4i and weight 2i+1 at bits 16 + 4i, so one
//           mask yields a pair as fp16 via the 0x6400 exponent trick);
//   params  one fp16 pair (scale s, offset m) per group of G weights, padded to 16 bytes;
// and weight = s * code + m (fp8: s * e4m3(code), m = 0). Rows stay 16-byte aligned, so a GQ
// matrix is an ordinary row-major Tensor: row slicing, concatenation and row gathers work.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "lite_llama/backend_options.h"  // QuantMode

namespace lite_llama {

enum class GqKind : uint8_t { Int8, Int4, Fp8 };

struct GqFormat {
  GqKind kind = GqKind::Int8;
  int group = 0;  // weights per (s, m) pair; 0 = one pair per row (per channel)

  int bits() const { return kind == GqKind::Int4 ? 4 : 8; }
  int64_t group_size(int64_t K) const { return group ? group : K; }
  int64_t groups(int64_t K) const { return K / group_size(K); }
  size_t code_bytes(int64_t K) const { return size_t(K) * size_t(bits()) / 8; }
  size_t param_bytes(int64_t K) const { return size_t((groups(K) + 3) / 4) * 16; }
  size_t row_bytes(int64_t K) const { return code_bytes(K) + param_bytes(K); }
};

// The format of a GQ dtype, nullopt for every other dtype.
std::optional<GqFormat> gq_format(DType t);
DType gq_dtype(GqFormat f);  // throws for a combination without a dtype
inline bool is_gq(DType t) { return gq_format(t).has_value(); }
// Whether rows of K weights fit the layout (K a multiple of 32 and of the group).
bool gq_row_ok(GqFormat f, int64_t K);

// Reference dequantisation of one GQ row (the ground truth for the CUDA kernels): fp32 math,
// weight = s * code + m.
void dequantize_row_gq(GqFormat f, const void* src, float* dst, int64_t K);

// Reference quantisers (round to nearest): symmetric per-group for Int8 (s = absmax / 127) and
// Fp8 (s = absmax / 448), asymmetric min/max for Int4 (s = (max - min) / 15, m = min).
void quantize_row_gq(GqFormat f, const float* x, void* dst, int64_t K);

// Builds one row from integer codes and per-group params given as floats (Int8 codes in
// [-128, 127], Int4 in [0, 15], Fp8 the e4m3 bit patterns); how the GGUF, GPTQ, AWQ and FP8
// loaders repack.
void pack_row_gq(GqFormat f, const int32_t* codes, const float* scales, const float* offsets,
                 void* dst, int64_t K);

// e4m3 (fp8) element conversions: the code's value (NaN for 0x7f / 0xff) and the nearest code
// to x, ties to even, saturating at +-448 (as the GPU's cvt.rn.satfinite).
float e4m3_to_f32(uint8_t v);
uint8_t f32_to_e4m3(float x);

// The GQ format that holds a GGUF block type without requantising (Q8_0, Q5_0, Q5_1, Q5_K ->
// Int8/32, Q4_0/Q4_1/Q4_K -> Int4/32, Q6_K -> Int8/16); nullopt for other types.
std::optional<GqFormat> gq_for_gguf(DType t);
// Repacks one GGUF row of K weights into gq_for_gguf(t) (scales rounded to fp16).
void repack_gguf_row(DType t, const void* src, void* dst, int64_t K);

// The one GQ format that holds each of `types` (GQ or GGUF-repackable) exactly: 8 bits if any
// needs them, the smallest group. nullopt if a type is neither, or fp8 mixes with integers.
std::optional<GqFormat> gq_common_format(const std::vector<DType>& types);
// One row of type t (GQ or GGUF-repackable) in format f, exactly (f wider or equal, see above).
void to_gq_row(DType t, const void* src, GqFormat f, void* dst, int64_t K);

}  // namespace lite_llama
