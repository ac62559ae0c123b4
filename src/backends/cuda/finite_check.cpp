#include "backends/cuda/finite_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace lite_llama::cuda {

void FiniteCheck::check(const char* op, const Tensor& t) {
  if (dev_.capturing()) return;
  // The probe reads 16-bit outputs only (fp32 ones cannot overflow fp16): without the NaN check,
  // an fp32 output is not copied back at all.
  if (!on_ && t.dtype == DType::F32) return;
  ++checked_ops_;
  std::vector<uint8_t> h(t.nbytes());
  dev_.copy_to_host(h.data(), t.data, h.size());
  const size_t n = size_t(t.numel());
  for (size_t i = 0; i < n; ++i) {
    uint16_t u = 0;
    float v = 0.f;
    if (t.dtype == DType::F32) std::memcpy(&v, h.data() + 4 * i, 4);
    else std::memcpy(&u, h.data() + 2 * i, 2), v = t.dtype == DType::BF16 ? bf16_to_f32(u) : f16_to_f32(u);
    if (probing_ && t.dtype != DType::F32)
      max_abs_ = std::max(max_abs_, std::isfinite(v) ? double(std::fabs(v)) : INFINITY);
    if (!on_) continue;
    if (!std::isfinite(v))
      fail("LITE_LLAMA_CHECK_FINITE: op #{} ({}) wrote {} at element {} of [{} x {}] (row {})", checked_ops_, op, v, i,
           t.rows(), t.cols(), int64_t(i) / std::max<int64_t>(1, t.cols()));
  }
}

}  // namespace lite_llama::cuda
