// Sampling on the GPU: each step's per-row parameters and penalty entries are uploaded into
// buffers reserved at start-up, then one kernel samples every row (kernels/sampling.cu).
#pragma once
#include <vector>

#include "backends/cuda/device.h"
#include "ops/ops.h"

namespace lite_llama::cuda {

class DeviceSampler {
 public:
  explicit DeviceSampler(CudaDevice& dev) : dev_(dev) {}
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;
  void reserve(int max_rows, int max_penalties);
  // False (nothing launched) when the step exceeds what was reserved.
  bool sample(const Tensor& logits, int rows, int limit, const std::vector<ops::SampleRow>& params,
              const std::vector<int32_t>& pen_tokens, const std::vector<int32_t>& pen_counts, int32_t* out);
  // Backend::score_rows: host arrays in and out, through buffers reserve() sized.
  bool score(const Tensor& logits, int rows, int limit, const int32_t* targets, int top_k, ops::RowScore* out,
             ops::TopToken* top);
  // Backend::keep_rows into a buffer of `rows` rows of `vocab` columns.
  void reserve_kept(int rows, int64_t vocab);
  bool keep(const Tensor& logits, const int32_t* rows, int n, Tensor* kept);
  // Grammar masks and logit biases (Backend::constrain_logits): uploaded, then one kernel each.
  // The masks (64 rows of a 128k vocabulary: 1 MiB) go through pinned memory on a copy stream of
  // their own, so their transfer overlaps the forward still running on the op stream.
  void reserve_constraints(int max_rows, int words, int max_bias);
  bool constrain(const Tensor& logits, int rows, const uint32_t* masks, int words,
                 const std::vector<ops::LogitBias>& bias);

 private:
  CudaDevice& dev_;
  Buffer rows_, pen_buf_;
  Buffer scores_;  // score(): targets, then results, then top tokens
  Buffer kept_, kept_ids_;
  int kept_cap_ = 0;
  int64_t kept_cols_ = 0;
  int rows_cap_ = 0, pen_cap_ = 0;
  Buffer masks_, bias_;
  int mask_rows_cap_ = 0, mask_words_cap_ = 0, bias_cap_ = 0;
  uint32_t* masks_host_ = nullptr;  // pinned staging of masks_
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t masks_ready_ = nullptr;
};

}  // namespace lite_llama::cuda
