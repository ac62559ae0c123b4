// The CUDA linear layer: which kernel computes out = x W^T (+ bias) for a weight's storage type
// and the token count, and the state that choice needs (cuBLASLt plans, the dequantisation tile,
// the int8 form of an activation that a producer wrote for the quantised decode GEMV).
#pragma once
#include <algorithm>
#include <utility>
#include <vector>
#include "backends/cuda/device.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/launchers.h"
#include "core/gq.h"
#include "lite_llama/backend_options.h"
#include "ops/ops.h"

namespace lite_llama::cuda {

class CudaLinear {
 public:
  // tensor_parallel: this rank is one of several (the default of gemv1_ordered_prefetch and qkv_rope_gemv).
  CudaLinear(CudaDevice& dev, const CudaTuning& tuning, bool tensor_parallel = false);

  void run(const Tensor& x, const ops::Linear& w, Tensor out);
  // out = linear(swiglu(gate_up), w) in one GEMV for the few tokens of a decode step (up to
  // CudaTuning::gemv_max_tokens, at most kGemv1MaxTokens) of 16-bit weights (the down projection),
  // where swiglu_fits; elsewhere the caller runs both ops.
  bool swiglu_fits(const Tensor& gate_up, const ops::Linear& w) const;
  void run_swiglu(const Tensor& gate_up, const ops::Linear& w, Tensor out);
  // out = swiglu(linear(x, gate_up)) in one GEMV for as many tokens of 16-bit gate|up weights (the
  // decode step's gate|up projection; CudaTuning::gate_up_swiglu), where gate_up_swiglu_fits.
  bool gate_up_swiglu_fits(const Tensor& x, const ops::Linear& gate_up, const Tensor& out) const;
  void run_gate_up_swiglu(const Tensor& x, const ops::Linear& gate_up, Tensor out);
  // qkv_rope_store(linear(x, qkv)) in one GEMV for one token of 16-bit QKV weights (the decode
  // step's QKV projection; CudaTuning::qkv_rope_gemv, by default on with tensor parallelism only),
  // where rope_store_fits (a.qkv unused).
  bool rope_store_fits(const Tensor& x, const ops::Linear& qkv, const RopeKvArgs& a) const;
  void run_rope_store(const Tensor& x, const ops::Linear& qkv, const RopeKvArgs& a);

  // At load, before CUDA graphs are captured: cuBLASLt's algorithm for each token count in
  // `token_counts` that this layer runs on cuBLASLt, timed over `same` (16-bit weights of one
  // shape, whose outputs are out_dtype) where CudaTuning::gemm_tune (Gemm::tune). Returns the
  // buckets tuned and, of them, those whose algorithm changed.
  std::pair<int, int> tune(const std::vector<const ops::Linear*>& same, DType out_dtype,
                           const std::vector<int>& token_counts);

  // A GQ weight of format f was prepared: allocates the scratch buffers its kernels use (at load,
  // never inside a step).
  void add_gq_weight(GqFormat f);
  // Per-channel fp8 matrices for the FP8 cuBLASLt GEMM carry their row scales as fp32 after the
  // rows (N floats), where the GEMM finds them.
  bool fp8_row_scales(GqFormat f, int64_t K) const;

  // Producers (norms, SwiGLU) also write their output's integer form into the scratch when a
  // quantised decode GEMV will read it: returns the scratch to pass (scratch nullptr: none) and
  // records which tensor it describes; every other op that writes activations calls forget_xq().
  GqX quantize_x_for(const Tensor& out, bool shape_ok);
  // The scratch with the integer form producers write and the GEMV reads.
  GqX x_form() const;
  void forget_xq() { xq_of_ = nullptr; }

 private:
  // rows tokens through the 16-bit GEMV of up to kGemv1MaxTokens tokens, as gemv_max_tokens allows
  // (the fused SwiGLU GEMVs' common condition).
  bool fused_gemv16(const ops::Linear& w, int64_t rows) const;
  // One GPU with at least kGemv1LoopMinGbsPerSm of peak bandwidth an SM (an H200, not an H100).
  bool high_bandwidth_per_sm() const;
  // CudaTuning::gemv_max_tokens resolved (-1: 2 where high_bandwidth_per_sm, else 1).
  int gemv_max_tokens() const;
  // T tokens of a 16-bit linear with K inputs run on the GEMV, not cuBLASLt (run() and tune()).
  bool takes_gemv(int T, int K) const { return T <= gemv_max_tokens() && K % 8 == 0; }
  // How the one-token 16-bit GEMV runs: CudaTuning::gemv1_loop_blocks_per_sm an SM at most (0: a
  // block a row group; -1: by the GPU's bandwidth) and gemv1_ordered_prefetch (on by default with
  // tensor parallelism).
  Gemv1Options gemv1_options() const;
  // A -1 | 0 | 1 setting (-1: on with tensor parallelism only) for this backend.
  bool on_here(int setting) const { return setting > 0 || (setting < 0 && tensor_parallel_); }
  void run_gq(const Tensor& x, const ops::Linear& w, Tensor out, int T, int N, int K, bool f32);
  bool run_fp8(const Tensor& x, const ops::Linear& w, Tensor out, int T, int N, int K, bool f32);
  // Most tokens of a step whose quantised linears of `kind` (GqKind) run the integer GEMV: the
  // tuning value within 0..8, or per format where it is -1, the measured best (H100,
  // docs/benchmarks/gpu.md): with int16 codes 2 (from 3 tokens gemv_gq16, as precise, is as
  // fast or faster); with int8 codes int4 3 and int8 4 (where gemv_gq16 measured faster, or
  // slower by under 5%). Without a kind: the most of any format (how many tokens a norm
  // quantises its output for).
  int dp4a_max(int kind = -1) const {
    if (tuning_.gq_dp4a_max_tokens >= 0) return std::min(tuning_.gq_dp4a_max_tokens, kGqGemvMaxTokens);
    if (!tuning_.gq_int8_act) return 2;
    return kind == int(GqKind::Int4) ? 3 : 4;
  }

  CudaDevice& dev_;
  const CudaTuning tuning_;
  const bool pdl_;  // tuning_.pdl on a GPU that has it
  const bool tensor_parallel_;
  Gemm gemm_;
  Buffer deq_, gq_scratch_;
  const void* xq_of_ = nullptr;  // the activation whose integer form gq_scratch_ holds
  int xq_rows_ = 0, xq_cols_ = 0;
  bool int_weights_ = false;     // some weights are int8 / int4 GQ (the integer decode path)
  int int4_weights_ = 0, int8_weights_ = 0;  // matrices of each kind (the codes' order)
};

}  // namespace lite_llama::cuda
