#include "backends/cuda/moe_experts.h"

#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launchers.h"

namespace lite_llama::cuda {

namespace {

// w with the [E * 2F, H] and [E * H, F] device matrices g and d as its stacked experts.
ops::MoeExperts stacked(ops::MoeExperts w, const Tensor& g, const Tensor& d) {
  const int64_t E = w.num_experts, H = w.hidden, F = w.ffn;
  w.stacked_gate_up = Tensor(g.data, g.dtype, {E, 2 * F, H}, Device::CUDA);
  w.stacked_down = Tensor(d.data, d.dtype, {E, H, F}, Device::CUDA);
  return w;
}

// The kernels' view of a stacked matrix: rows of the activation type, or GQ rows.
MoeWeights weights_of(const Tensor& t, DType act) {
  MoeWeights m;
  m.data = t.data;
  const std::optional<GqFormat> f = gq_format(t.dtype);
  LL_CHECK(f || t.dtype == act, "moe_experts: experts of type {} (the activation type, or GQ rows on CUDA)",
           dtype_name(t.dtype));
  if (f) m.kind = int(f->kind), m.group = f->group;
  return m;
}

}  // namespace

ops::MoeExperts stack_experts(CudaDevice& dev, WeightPrep& prep, const ops::MoeExperts& host, uint64_t seed,
                              std::vector<Buffer>& keep) {
  const int E = host.num_experts;
  const int64_t H = host.hidden, F = host.ffn;
  LL_CHECK(E >= 1 && E <= kMoeMaxExperts, "mixture of experts on CUDA: {} experts (at most {})", E, kMoeMaxExperts);
  LL_CHECK(H % 8 == 0 && F % 8 == 0, "mixture of experts on CUDA: hidden {} and expert size {} must be multiples of 8",
           H, F);
  const QuantMode q = prep.mode();
  LL_CHECK((q != QuantMode::Int8 && q != QuantMode::Int4 && q != QuantMode::Fp8) || (H % 32 == 0 && F % 32 == 0),
           "--quantize {} on CUDA: MoE hidden {} and expert size {} must be multiples of 32",
           quant_mode_name(q), H, F);
  ops::MoeExperts w;
  w.num_experts = E, w.hidden = H, w.ffn = F;
  const size_t es = 2, expert_gu = size_t(2 * F * H) * es, half = size_t(F * H) * es;
  if (!host.gate.empty() && host.gate[0].data == nullptr) {
    // Dummy: projection p as one [E * rows, cols] draw of seed + p (ops.h), then interleaved so
    // that expert e's gate rows are followed by its up rows.
    Buffer gu = dev.alloc(size_t(E) * expert_gu);
    for (int p = 0; p < 2; ++p) {
      Buffer part = prep.random_16bit(E * F, H, seed + uint64_t(p), 1.0f / std::sqrt(float(H)));
      LL_CUDA(cudaMemcpy2DAsync(gu.as<uint8_t>() + size_t(p) * half, expert_gu, part.data(), half, half, size_t(E),
                                cudaMemcpyDeviceToDevice, dev.stream()));
      dev.synchronize();
    }
    Buffer down = prep.random_16bit(E * H, F, seed + 2, 1.0f / std::sqrt(float(F)));
    const Tensor g16(gu.data(), dev.act_dtype(), {int64_t(E) * 2 * F, H}, Device::CUDA);
    const Tensor d16(down.data(), dev.act_dtype(), {int64_t(E) * H, F}, Device::CUDA);
    keep.push_back(std::move(gu));
    const Tensor g = prep.experts_matrix(g16, keep);
    keep.push_back(std::move(down));
    const Tensor d = prep.experts_matrix(d16, keep);
    return stacked(w, g, d);
  }
  std::vector<Tensor> gu;
  for (int e = 0; e < E; ++e) gu.push_back(host.gate[size_t(e)]), gu.push_back(host.up[size_t(e)]);
  const Tensor g = prep.experts_matrix(gu, int64_t(E) * 2 * F, H, keep);
  const Tensor d = prep.experts_matrix(host.down, int64_t(E) * H, F, keep);
  return stacked(w, g, d);
}

size_t experts_workspace_bytes(int max_tokens, int top_k, const ops::MoeExperts& w) {
  return moe_workspace_bytes(max_tokens, top_k, w.num_experts, int(w.hidden), int(w.ffn));
}

void run_experts(CudaDevice& dev, const Tensor& x, const ops::MoeExperts& w, const int32_t* t_expert,
                 const float* t_weight, int top_k, void* workspace, Tensor out, const CudaTuning& tuning, bool pdl) {
  LL_CHECK(w.stacked_gate_up.data && w.stacked_down.data, "moe_experts: the experts were not stacked for CUDA");
  MoeArgs a;
  a.act = dev.act();
  a.tokens = int(x.rows()), a.top_k = top_k, a.experts = w.num_experts, a.hidden = int(w.hidden), a.ffn = int(w.ffn);
  a.x = x.data;
  a.gate_up = weights_of(w.stacked_gate_up, dev.act_dtype());
  a.down = weights_of(w.stacked_down, dev.act_dtype());
  a.t_expert = t_expert, a.t_weight = t_weight;
  a.out = out.data, a.out_f32 = out.dtype == DType::F32;
  a.workspace = workspace;
  a.gemv_max_assign = tuning.moe_gemv_max_assign;
  a.gemv.pdl = pdl, a.gemv.l2_prefetch = tuning.moe_l2_prefetch;
  a.gemv.row_groups = tuning.moe_gemv_row_groups, a.gemv.few_row_groups = tuning.moe_gemv_few_row_groups;
  a.gemv.mma = tuning.moe_gemv_mma, a.gemv.preload = tuning.moe_gemv_preload;
  LL_CUDA(moe_experts(a, dev.stream()));
}

}  // namespace lite_llama::cuda
