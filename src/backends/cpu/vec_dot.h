// Dot products of one weight row (in its storage type) with one activation row, the inner loop
// of every CPU projection. Quantised weights meet activations quantised to Q8_1 blocks and are
// multiplied in integers (AVX-VNNI / AVX2 where the build machine has them, plain C otherwise).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace lite_llama::cpu {

// Whether weights of this type take Q8_1 activations (true) or fp32 activations (false).
bool uses_q8_activations(DType wtype);

// n elements; x is BlockQ8_1[n/32] for quantised weights, float[n] otherwise.
float vec_dot(DType wtype, const void* w, const void* x, int64_t n);

// Several weight rows (stride row_bytes) against one activation row: out[r] = dot(row r, x).
void vec_dot_rows(DType wtype, const void* w, size_t row_stride, int rows, const void* x,
                  int64_t n, float* out);

// Quantises activations for uses_q8_activations types (SIMD).
void quantize_q8_1(const float* x, BlockQ8_1* out, int64_t n);

// Names the instruction set the kernels were built for ("avx-vnni", "avx2", "scalar").
const char* simd_name();

}  // namespace lite_llama::cpu
