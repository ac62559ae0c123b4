// Mixture-of-experts weights and dispatch on CUDA (kernels/moe.cu): the experts of a layer
// stacked into one [E, 2F, H] gate|up and one [E, H, F] down matrix (the grouped GEMV and GEMM
// index them by expert), each in the activation type or in a GQ format (core/gq.h) the kernels
// dequantise as they read it: --quantize int8 / fp8 / int4 give the dense weights' formats (int8
// and fp8 e4m3 per channel, int4 in groups of 128 where K allows); a GGUF file's experts keep
// their blocks, repacked as int4 / 32 (Q4_0, Q4_1, Q4_K) or int8 / 32 or 16 (Q8_0, Q5_*, Q6_K),
// the smallest common one where a matrix mixes types; an fp8 checkpoint's experts keep their e4m3
// rows and scales (per row, or per 128 weights). See WeightPrep::experts_matrix.
#pragma once
#include <vector>

#include "backends/cuda/device.h"
#include "lite_llama/backend_options.h"
#include "backends/cuda/weight_prep.h"
#include "ops/ops.h"

namespace lite_llama::cuda {

// Host experts (any file type), or dummy ones (data == nullptr: drawn on the device as ops.h
// specifies, seed + projection), stacked on the device.
ops::MoeExperts stack_experts(CudaDevice& dev, WeightPrep& prep, const ops::MoeExperts& host, uint64_t seed,
                              std::vector<Buffer>& keep);
size_t experts_workspace_bytes(int max_tokens, int top_k, const ops::MoeExperts& w);
void run_experts(CudaDevice& dev, const Tensor& x, const ops::MoeExperts& w, const int32_t* t_expert,
                 const float* t_weight, int top_k, void* workspace, Tensor out, const CudaTuning& tuning, bool pdl);

}  // namespace lite_llama::cuda
