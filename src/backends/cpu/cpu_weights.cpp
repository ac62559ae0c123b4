#include "backends/cpu/cpu_weights.h"

#include "backends/cpu/vec_dot.h"
#include "core/error.h"
#include "core/gq.h"
#include "core/quant.h"

namespace lite_llama::cpu {
namespace {

// Weight types without CPU kernels, converted once at load into a new buffer: Q5_0 / Q5_1
// (llama.cpp's fallback for rows that K-quants cannot hold) and the GPU layouts of GPTQ / AWQ /
// FP8 checkpoints. Q5_0 becomes Q8_0 exactly (same scale, codes - 16); Q5_1 (scale and offset)
// F16; GQ rows BF16 (2 bytes per weight instead of ~0.5).
Tensor converted(ThreadPool& pool, const Tensor& host, std::vector<Buffer>& keep) {
  const int64_t rows = host.rows(), cols = host.cols();
  const DType to = host.dtype == DType::Q5_0 ? DType::Q8_0 : host.dtype == DType::Q5_1 ? DType::F16 : DType::BF16;
  const size_t rb = row_bytes(to, cols);
  Buffer b = host_buffer(rb * size_t(rows));
  pool.parallel_for(rows, [&](int64_t lo, int64_t hi) {
    std::vector<float> f(static_cast<size_t>(cols));
    for (int64_t r = lo; r < hi; ++r) {
      auto* dst = b.as<uint8_t>() + size_t(r) * rb;
      if (to == DType::Q8_0) {
        q5_0_to_q8_0(host.row(r), dst, cols);
      } else {
        dequantize_row(host.dtype, host.row(r), f.data(), cols);
        quantize_row(to, f.data(), dst, cols);
      }
    }
  });
  Tensor t(b.data(), to, {rows, cols});
  keep.push_back(std::move(b));
  return t;
}

}  // namespace

Tensor prepare_cpu_weight(ThreadPool& pool, const Tensor& host, std::vector<Buffer>& keep) {
  if (is_gq(host.dtype) || host.dtype == DType::Q5_0 || host.dtype == DType::Q5_1) return converted(pool, host, keep);
  LL_CHECK(host.dtype == DType::F32 || host.dtype == DType::F16 || host.dtype == DType::BF16 ||
               uses_q8_activations(host.dtype) || host.dtype == DType::Q4_K ||
               host.dtype == DType::Q5_K || host.dtype == DType::Q6_K,
           "cpu backend: weights of type {} are not supported", dtype_name(host.dtype));
  return host;
}

}  // namespace lite_llama::cpu
