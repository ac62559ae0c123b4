// The CUDA backend: bf16 (or fp16) activations and weights, fp32 accumulation, our kernels plus
// cuBLASLt, one stream, CUDA graphs for decode.
#pragma once
#include <memory>
#include <vector>

#include "lite_llama/backend_options.h"
#include "ops/ops.h"

namespace lite_llama::cuda {

int device_count();
// opts.dtype, opts.quantize and opts.cuda; the device is the current CUDA device.
std::unique_ptr<ops::Backend> make_cuda_backend(const BackendOptions& opts);
// Rank r of tp on device r, joined by NCCL communicators; the caller's current device is kept.
std::vector<std::unique_ptr<ops::Backend>> make_cuda_tp_backends(const BackendOptions& opts, int tp);

}  // namespace lite_llama::cuda
