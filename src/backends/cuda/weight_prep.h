// Weights into the form the CUDA kernels compute with: 16-bit rows in the activation type, or the
// GQ layout (core/gq.h) for quantised files and --quantize int8/int4/fp8. Host rows are converted
// on a few threads and uploaded in chunks, so the host never holds a converted copy of the model;
// --quantize quantises on the device from a 16-bit upload.
#pragma once
#include <optional>
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/linear.h"
#include "core/gq.h"
#include "ops/ops.h"

namespace lite_llama::cuda {

class WeightPrep {
 public:
  WeightPrep(CudaDevice& dev, CudaLinear& linear, QuantMode mode) : dev_(dev), linear_(linear), mode_(mode) {}

  // Host parts (row blocks of one [N, K] matrix) -> one device matrix, owned by buffers in keep.
  Tensor matrix(const std::vector<Tensor>& parts, int64_t N, int64_t K, bool embedding, std::vector<Buffer>& keep);
  // F32 bias on the device -> the activation type (for the GEMM epilogues).
  Tensor bias(const Tensor& bias, std::vector<Buffer>& keep);
  // Random 16-bit weights (--load-format dummy), quantised under an explicit --quantize.
  Tensor random(int64_t rows, int64_t cols, uint64_t seed, float scale, bool embedding, std::vector<Buffer>& keep);
  // The MoE kernels' expert weights: under --quantize int8 / int4 / fp8 GQ rows of the dense
  // weights' format and quantiser; from GGUF or GQ files (GPTQ, AWQ, fp8 checkpoints) their own
  // rows repacked as matrix() does; else the activation type.
  Tensor experts_matrix(const std::vector<Tensor>& parts, int64_t N, int64_t K, std::vector<Buffer>& keep);
  // The same for a 16-bit device matrix owned by the last buffer in keep (dummy experts).
  Tensor experts_matrix(const Tensor& t, std::vector<Buffer>& keep);
  Buffer random_16bit(int64_t rows, int64_t cols, uint64_t seed, float scale);
  QuantMode mode() const { return mode_; }

 private:
  void check_not_prequantized(const std::vector<Tensor>& parts) const;
  std::optional<GqFormat> explicit_format(int64_t K, bool embedding) const;
  std::optional<GqFormat> file_format(const std::vector<Tensor>& parts, int64_t K) const;
  void upload_rows(const Tensor& host, uint8_t* dst);
  template <typename Convert>
  void upload_rows(const Tensor& host, uint8_t* dst, size_t out_rb, Convert&& convert);
  Tensor upload_16bit(const std::vector<Tensor>& parts, int64_t N, int64_t K, std::vector<Buffer>& keep);
  Tensor upload_gq(const std::vector<Tensor>& parts, GqFormat f, int64_t N, int64_t K, std::vector<Buffer>& keep,
                   bool for_linear);
  Tensor quantize_on_device(const Tensor& t, GqFormat f, std::vector<Buffer>& keep, bool for_linear = true);
  Buffer alloc_gq(GqFormat f, int64_t N, int64_t K, bool for_linear);
  Tensor gq_matrix(Buffer b, GqFormat f, int64_t N, int64_t K, std::vector<Buffer>& keep, bool for_linear);

  CudaDevice& dev_;
  CudaLinear& linear_;
  const QuantMode mode_;
};

}  // namespace lite_llama::cuda
