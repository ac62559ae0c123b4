// The avx512 kernel set: this file's compiler flags (src/CMakeLists.txt) pick the code paths of
// the headers below, whose definitions have internal linkage.
// GCC 12 warns falsely inside its own AVX-512 reduction intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "backends/cpu/attention_item.h"
#include "backends/cpu/elementwise.h"
#include "backends/cpu/gemm_tiles.h"
#include "backends/cpu/gemv_int16.h"
#include "backends/cpu/kernels.h"

namespace lite_llama::cpu {

const Kernels& avx512_kernels() {
  static const Kernels k{CpuIsa::Avx512, gemm_simd, swiglu_row, attn::attend_tile,
                         i16::quantize, i16::gemm};
  return k;
}

}  // namespace lite_llama::cpu
