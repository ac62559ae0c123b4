// Plain reference (de)quantisation of the block formats. These loops are the ground truth that
// the SIMD and CUDA kernels are tested against, and what loaders use to convert weights.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace lite_llama {

// dst[0..n) = values of one row of `n` elements stored as `t` (F32/F16/BF16/Q4_0/Q4_1/Q8_0,
// and the K-quants Q4_K/Q5_K/Q6_K).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Reference quantisers (round to nearest, ggml's conventions).
void quantize_row_q8_0(const float* x, void* dst, int64_t n);
void quantize_row_q4_0(const float* x, void* dst, int64_t n);
void quantize_row_q4_1(const float* x, void* dst, int64_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* dst, int64_t n);
// 6-bit scale/min pair j (0..7) of a Q4_K/Q5_K super-block's 12 scale bytes (ggml's
// get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m);
// Q5_0 blocks as Q8_0 blocks with the same scale and codes (exact): how the CPU runs Q5_0.
void q5_0_to_q8_0(const void* src, void* dst, int64_t n);
// Any supported weight type from F32 (F16/BF16 round to nearest even).
void quantize_row(DType t, const float* x, void* dst, int64_t n);

}  // namespace lite_llama
