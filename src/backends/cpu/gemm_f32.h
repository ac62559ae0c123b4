// fp32-activation projection kernel: weight blocks are dequantised in registers (never to a
// full copy) and multiplied with fp32 activations, so results match an fp32 reference of the
// dequantised weights up to summation order. This is the CPU backend's default path.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "core/dtype.h"

namespace lite_llama::cpu {

// out[t * ldo + r] = sum_k x[t * K + k] * W[r, k] for r < rows, t < T.
// W rows are `row_stride` bytes apart, stored as wtype (F32/F16/BF16/Q4_0/Q4_1/Q8_0, or
// Q4_K/Q5_K/Q6_K); K must be a multiple of wtype's block size (256 for the K-quants).
// `k`: the kernel set (kernels_for), the backend's (CpuTuning::isa): no overload picks one itself,
// so that a forced set reaches every caller (the MoE experts once ran the widest regardless).
void gemm_f32(const Kernels& k, DType wtype, const void* w, size_t row_stride, int64_t rows,
              const float* x, int64_t T, int64_t K, float* out, int64_t ldo);

// The widest instruction set this CPU runs ("avx512", "avx2", "generic").
const char* gemm_f32_isa();

}  // namespace lite_llama::cpu
