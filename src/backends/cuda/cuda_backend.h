// The CUDA backend: bf16 (or fp16) activations and weights, fp32 accumulation, our kernels plus
// cuBLASLt, one stream, CUDA graphs for decode.
#pragma once
#include <memory>
#include <string>

#include "ops/ops.h"

namespace lite_llama::cuda {

int device_count();
// dtype: "bf16" or "fp16"; quantize: a --quantize mode (core/gq.h).
std::unique_ptr<ops::Backend> make_cuda_backend(const std::string& dtype, const std::string& quantize);

}  // namespace lite_llama::cuda
