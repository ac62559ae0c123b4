#include "backends/cpu/gemm_f32.h"

#include <vector>

#include "core/quant.h"

namespace lite_llama::cpu {

const Kernels& generic_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

const Kernels& kernels_for(CpuIsa isa) {
#if defined(LL_X86_KERNELS)
  if (isa == CpuIsa::Avx512) return avx512_kernels();
  if (isa == CpuIsa::Avx2) return avx2_kernels();
#endif
  return generic_kernels();
}

const char* gemm_f32_isa() { return cpu_isa_name(detect_cpu_isa()); }

void gemm_f32(const Kernels& k, DType t, const void* w, size_t row_stride, int64_t rows,
              const float* x, int64_t T, int64_t K, float* out, int64_t ldo) {
  thread_local std::vector<float> buf;
  if (buf.size() < gemm_scratch_floats(K)) buf.resize(gemm_scratch_floats(K));
  if (k.gemm(t, w, row_stride, rows, x, T, K, out, ldo, buf.data())) return;
  // Plain fallback: dequantise a row once, then dot products.
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, base + size_t(r) * row_stride, buf.data(), K);
    for (int64_t tk = 0; tk < T; ++tk) {
      float s = 0;
      for (int64_t i = 0; i < K; ++i) s += buf[size_t(i)] * x[tk * K + i];
      out[tk * ldo + r] = s;
    }
  }
}

}  // namespace lite_llama::cpu
