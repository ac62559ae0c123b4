#include "backends/cuda/device_sampler.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"

namespace lite_llama::cuda {

void DeviceSampler::reserve(int max_rows, int max_penalties) {
  rows_cap_ = max_rows;
  pen_cap_ = max_penalties;
  rows_ = dev_.alloc(size_t(max_rows) * sizeof(ops::SampleRow));
  pen_buf_ = dev_.alloc(size_t(2) * size_t(std::max(1, max_penalties)) * sizeof(int32_t));
}

bool DeviceSampler::sample(const Tensor& logits, int rows, int limit, const std::vector<ops::SampleRow>& params,
                           const std::vector<int32_t>& pen_tokens, const std::vector<int32_t>& pen_counts,
                           int32_t* out) {
  if (rows > rows_cap_ || int(pen_tokens.size()) > pen_cap_) return false;
  cudaStream_t s = dev_.stream();
  LL_CUDA(cudaMemcpyAsync(rows_.data(), params.data(), size_t(rows) * sizeof(ops::SampleRow),
                          cudaMemcpyHostToDevice, s));
  int32_t* toks = pen_buf_.as<int32_t>();
  int32_t* counts = toks + std::max(1, pen_cap_);
  if (!pen_tokens.empty()) {
    LL_CUDA(cudaMemcpyAsync(toks, pen_tokens.data(), pen_tokens.size() * 4, cudaMemcpyHostToDevice, s));
    LL_CUDA(cudaMemcpyAsync(counts, pen_counts.data(), pen_counts.size() * 4, cudaMemcpyHostToDevice, s));
  }
  LL_CUDA(sample_rows(static_cast<float*>(logits.data), rows, int(logits.cols()), limit,
                      rows_.as<ops::SampleRow>(), toks, counts, out, s));
  return true;
}

}  // namespace lite_llama::cuda
