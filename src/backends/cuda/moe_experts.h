// Mixture-of-experts weights and dispatch on CUDA (kernels/moe.cu): the experts of a layer
// stacked into one [E, 2F, H] gate|up and one [E, H, F] down matrix (the grouped GEMV and GEMM
// index them by expert), in the activation type, or under --quantize int8 as int8 rows with one
// fp16 scale per row and expert: the dense int8 format (core/gq.h, per channel) and quantiser,
// half the bytes. --quantize int4 / fp8 leave the experts 16-bit (WeightPrep::experts_matrix).
#pragma once
#include <vector>

#include "backends/cuda/device.h"
#include "backends/cuda/weight_prep.h"
#include "ops/ops.h"

namespace lite_llama::cuda {

// Host experts (any file type), or dummy ones (data == nullptr: drawn on the device as ops.h
// specifies, seed + projection), stacked on the device.
ops::MoeExperts stack_experts(CudaDevice& dev, WeightPrep& prep, const ops::MoeExperts& host, uint64_t seed,
                              std::vector<Buffer>& keep);
size_t experts_workspace_bytes(int max_tokens, int top_k, const ops::MoeExperts& w);
void run_experts(CudaDevice& dev, const Tensor& x, const ops::MoeExperts& w, const int32_t* t_expert,
                 const float* t_weight, int top_k, void* workspace, Tensor out, int gemv_max_assign);

}  // namespace lite_llama::cuda
