// Element-wise CPU kernels of one instruction set (included by kernels_<isa>.cpp only).
#pragma once
#include <cmath>
#include <cstdint>

#include "backends/cpu/simd_f32.h"

namespace lite_llama::cpu {
namespace {

// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i].
void swiglu_row(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
#if LL_VEC > 1
  using namespace simd;
  for (; i + LL_VEC <= n; i += LL_VEC) {
    const V g = vload(gate + i);
    const V e = vexp(vsub(vzero(), g));
    vstore(out + i, vmul(vdiv(g, vadd(vset1(1.0f), e)), vload(up + i)));
  }
#endif
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace
}  // namespace lite_llama::cpu
