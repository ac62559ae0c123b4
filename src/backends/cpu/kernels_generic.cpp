// The generic kernel set: this file's compiler flags (src/CMakeLists.txt) pick the code paths of
// the headers below, whose definitions have internal linkage.
#include "backends/cpu/attention_item.h"
#include "backends/cpu/elementwise.h"
#include "backends/cpu/gemm_tiles.h"
#include "backends/cpu/gemv_int16.h"
#include "backends/cpu/kernels.h"

namespace lite_llama::cpu {

const Kernels& generic_kernels() {
  static const Kernels k{CpuIsa::Generic, gemm_simd, swiglu_row, attn::attend_tile,
                         i16::quantize, i16::gemm};
  return k;
}

}  // namespace lite_llama::cpu
