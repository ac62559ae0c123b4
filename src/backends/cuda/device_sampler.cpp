#include "backends/cuda/device_sampler.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {

void DeviceSampler::reserve(int max_rows, int max_penalties) {
  rows_cap_ = max_rows;
  pen_cap_ = max_penalties;
  rows_ = dev_.alloc(size_t(max_rows) * sizeof(ops::SampleRow));
  pen_buf_ = dev_.alloc(size_t(2) * size_t(std::max(1, max_penalties)) * sizeof(int32_t));
  scores_ = dev_.alloc(size_t(max_rows) * (sizeof(int32_t) + sizeof(ops::RowScore) +
                                           ops::Backend::kMaxTopLogprobs * sizeof(ops::TopToken)));
}

bool DeviceSampler::score(const Tensor& logits, int rows, int limit, const int32_t* targets, int top_k,
                          ops::RowScore* out, ops::TopToken* top) {
  if (rows > rows_cap_ || top_k < 0 || top_k > ops::Backend::kMaxTopLogprobs) return false;
  if (rows == 0) return true;
  cudaStream_t s = dev_.stream();
  auto* d_targets = scores_.as<int32_t>();
  auto* d_out = reinterpret_cast<ops::RowScore*>(d_targets + rows_cap_);
  auto* d_top = reinterpret_cast<ops::TopToken*>(d_out + rows_cap_);
  LL_CUDA(cudaMemcpyAsync(d_targets, targets, size_t(rows) * sizeof(int32_t), cudaMemcpyHostToDevice, s));
  LL_CUDA(score_rows(logits.ptr<float>(), rows, int(logits.cols()), limit, d_targets, top_k, d_out, d_top, s));
  LL_CUDA(cudaMemcpyAsync(out, d_out, size_t(rows) * sizeof(ops::RowScore), cudaMemcpyDeviceToHost, s));
  if (top_k > 0)
    LL_CUDA(cudaMemcpyAsync(top, d_top, size_t(rows) * size_t(top_k) * sizeof(ops::TopToken),
                            cudaMemcpyDeviceToHost, s));
  LL_CUDA(cudaStreamSynchronize(s));
  return true;
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

void DeviceSampler::reserve_kept(int rows, int64_t vocab) {
  kept_cap_ = rows;
  kept_cols_ = vocab;
  kept_ = dev_.alloc(size_t(rows) * size_t(vocab) * sizeof(float));
  kept_ids_ = dev_.alloc(size_t(std::max(1, rows)) * sizeof(int32_t));
}

bool DeviceSampler::keep(const Tensor& logits, const int32_t* rows, int n, Tensor* kept) {
  if (n > kept_cap_ || logits.cols() != kept_cols_ || logits.dtype != DType::F32) return false;
  cudaStream_t s = dev_.stream();
  LL_CUDA(cudaMemcpyAsync(kept_ids_.data(), rows, size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice, s));
  LL_CUDA(gather_rows(logits.data, kept_ids_.as<int32_t>(), kept_.data(), n, size_t(kept_cols_) * sizeof(float), s));
  *kept = Tensor(kept_.data(), DType::F32, {int64_t(n), kept_cols_}, logits.device);
  return true;
}

DeviceSampler::~DeviceSampler() {
  if (masks_host_) cudaFreeHost(masks_host_);
  if (masks_ready_) cudaEventDestroy(masks_ready_);
  if (copy_stream_) cudaStreamDestroy(copy_stream_);
}

void DeviceSampler::reserve_constraints(int max_rows, int words, int max_bias) {
  mask_rows_cap_ = max_rows;
  mask_words_cap_ = words;
  bias_cap_ = max_bias;
  const size_t mask_bytes = size_t(std::max(1, max_rows)) * size_t(std::max(1, words)) * sizeof(uint32_t);
  masks_ = dev_.alloc(mask_bytes);
  bias_ = dev_.alloc(size_t(std::max(1, max_bias)) * sizeof(ops::LogitBias));
  if (masks_host_) cudaFreeHost(masks_host_);
  LL_CUDA(cudaMallocHost(&masks_host_, mask_bytes));
  if (!copy_stream_) {
    LL_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    LL_CUDA(cudaEventCreateWithFlags(&masks_ready_, cudaEventDisableTiming));
  }
}

bool DeviceSampler::constrain(const Tensor& logits, int rows, const uint32_t* masks, int words,
                              const std::vector<ops::LogitBias>& bias) {
  if (rows > mask_rows_cap_ || words > mask_words_cap_ || int(bias.size()) > bias_cap_) return false;
  cudaStream_t s = dev_.stream();
  const bool with_masks = masks && words > 0;
  if (with_masks) {
    // The staging buffer is free once the last copy from it is done (a step may constrain its
    // kept logprob rows too).
    LL_CUDA(cudaEventSynchronize(masks_ready_));
    const size_t bytes = size_t(rows) * size_t(words) * sizeof(uint32_t);
    std::memcpy(masks_host_, masks, bytes);
    LL_CUDA(cudaMemcpyAsync(masks_.data(), masks_host_, bytes, cudaMemcpyHostToDevice, copy_stream_));
    LL_CUDA(cudaEventRecord(masks_ready_, copy_stream_));
    LL_CUDA(cudaStreamWaitEvent(s, masks_ready_, 0));
  }
  if (!bias.empty())
    LL_CUDA(cudaMemcpyAsync(bias_.data(), bias.data(), bias.size() * sizeof(ops::LogitBias),
                            cudaMemcpyHostToDevice, s));
  LL_CUDA(constrain_rows(static_cast<float*>(logits.data), rows, int(logits.cols()),
                         with_masks ? masks_.as<uint32_t>() : nullptr, words,
                         bias.empty() ? nullptr : bias_.as<ops::LogitBias>(), int(bias.size()), s));
  return true;
}

}  // namespace lite_llama::cuda
