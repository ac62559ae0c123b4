// Mixture of experts on CUDA against the CPU reference loops (cpu::ref::moe_route / moe_experts)
// on the same values: the router's top-k (experts exactly, weights to fp32 rounding) with and
// without renormalisation, ties and expert counts that are not multiples of 32; the experts of
// every token (stacked 16-bit weights; the sort-free grouped GEMV and the expert-sorted
// tensor-core GEMM; the weighted combine in ascending expert order) for decode-sized and prefill-sized token
// counts, fp32 and 16-bit outputs; dummy experts drawn as ops.h specifies; and the whole layer
// captured in a CUDA graph and replayed on new routes.
#include "backends/cpu/ref_ops.h"
#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

class CudaMoe : public CudaVsCpu {};

struct Experts {
  std::vector<std::vector<float>> gate, up, down;  // per expert, values of the activation type
  ops::MoeExperts host;                            // views of them (F32)
};

Experts make_experts(std::mt19937& rng, DType act, int E, int64_t H, int64_t F) {
  Experts x;
  for (int e = 0; e < E; ++e) {
    x.gate.push_back(rand_act(rng, size_t(F * H), act, 1.0f / std::sqrt(float(H))));
    x.up.push_back(rand_act(rng, size_t(F * H), act, 1.0f / std::sqrt(float(H))));
    x.down.push_back(rand_act(rng, size_t(H * F), act, 1.0f / std::sqrt(float(F))));
  }
  x.host.num_experts = E, x.host.hidden = H, x.host.ffn = F;
  for (int e = 0; e < E; ++e) {
    x.host.gate.push_back(host_f32(x.gate[size_t(e)], {F, H}));
    x.host.up.push_back(host_f32(x.up[size_t(e)], {F, H}));
    x.host.down.push_back(host_f32(x.down[size_t(e)], {H, F}));
  }
  return x;
}

TEST_P(CudaMoe, RouterTopKMatchesReference) {
  std::mt19937 rng(11);
  struct Case {
    int T, E, k;
    bool norm;
  };
  for (const Case c : {Case{37, 128, 8, true}, Case{5, 16, 4, false}, Case{9, 60, 6, true}, Case{1, 256, 16, false}}) {
    std::vector<float> logits = rand_act(rng, size_t(c.T) * size_t(c.E), act, 2.0f);
    for (int e = 0; e < c.E; ++e) logits[size_t(e)] = 0.5f;  // token 0: all tied
    DevTensor l = dev_from(*gpu, logits, act, {c.T, c.E});
    DevInts ex = dev_ints(*gpu, std::vector<int32_t>(size_t(c.T * c.k), -1));
    Buffer wt = gpu->alloc(size_t(c.T * c.k) * 4);
    gpu->moe_route(l.t, c.k, c.norm, ex.ptr(), wt.as<float>());
    const std::vector<int32_t> got_e = ints_to_host(*gpu, ex.ptr(), size_t(c.T * c.k));
    std::vector<float> got_w(size_t(c.T * c.k));
    gpu->copy_to_host(got_w.data(), wt.data(), got_w.size() * 4);
    std::vector<int32_t> want_e(got_e.size());
    std::vector<float> want_w(got_w.size());
    cpu::ref::moe_route(logits.data(), c.T, c.E, c.k, c.norm, want_e.data(), want_w.data());
    EXPECT_EQ(got_e, want_e) << c.T << " tokens, " << c.E << " experts, top " << c.k;
    for (size_t i = 0; i < got_w.size(); ++i) EXPECT_NEAR(got_w[i], want_w[i], 2e-6 + 1e-5 * want_w[i]) << i;
  }
}

// Both paths: the sort-free GEMV (steps of up to 1,024 assignments by default) and the
// expert-sorted tensor-core GEMM (forced for every size by moe_gemv_max_assign = 0). H and F are
// not multiples of the GEMM's 32-column K tiles or 64-row N tiles.
TEST_P(CudaMoe, ExpertsMatchReference) {
  std::mt19937 rng(12);
  const int E = 12, k = 3;
  CudaTuning all_gemm;
  all_gemm.moe_gemv_max_assign = 0;
  std::unique_ptr<ops::Backend> gemm_gpu = make_gpu(GetParam(), all_gemm);
  std::vector<Buffer> gemm_keep;  // freed before gemm_gpu
  // H and F not multiples of the GEMM tiles, and multiples of them.
  for (const auto& [H, F] : {std::pair<int64_t, int64_t>{96, 40}, std::pair<int64_t, int64_t>{128, 64}})
  for (ops::Backend* be : {gpu.get(), gemm_gpu.get()}) {
    Experts w = make_experts(rng, act, E, H, F);
    const ops::MoeExperts dev = be->prepare_experts(w.host, 0, be == gpu.get() ? keep : gemm_keep);
    settle(*be);
    // Decode steps, more assignments per expert than a GEMV chunk or a GEMM tile holds, and
    // 1,200 assignments (past the GEMV's limit).
    for (int T : {1, 4, 37, 300, 400}) {
      std::vector<float> x = rand_act(rng, size_t(T) * size_t(H), act);
      std::vector<int32_t> ex(size_t(T * k));
      std::vector<float> wt(size_t(T * k));
      for (int t = 0; t < T; ++t) {
        const std::vector<int32_t> d = distinct(rng, E, k);  // k different experts, any order
        for (int j = 0; j < k; ++j) ex[size_t(t * k + j)] = d[size_t(j)], wt[size_t(t * k + j)] = 0.2f + 0.3f * float(j);
      }
      std::vector<float> want(size_t(T) * size_t(H));
      cpu::ref::moe_experts(x.data(), T, w.host, ex.data(), wt.data(), k, want.data());
      DevTensor dx = dev_from(*be, x, act, {T, H});
      DevInts dex = dev_ints(*be, ex);
      Buffer dwt = be->alloc(wt.size() * 4);
      be->copy_to_device(dwt.data(), wt.data(), wt.size() * 4);
      Buffer ws = be->alloc(be->moe_workspace_bytes(T, k, dev));
      for (DType out_t : {DType::F32, act}) {
        DevTensor out = dev_alloc(*be, out_t, {T, H});
        poison(*be, out.t);
        be->moe_experts(dx.t, dev, dex.ptr(), dwt.as<float>(), k, ws.data(), out.t);
        // The gate|up products and the SwiGLU output are rounded to 16 bits on the device.
        EXPECT_TRUE(close_rows(to_host(*be, out.t), want, size_t(H), act_tol(act)))
            << T << " tokens, H " << H << " F " << F << (be == gemm_gpu.get() ? " (GEMM forced)" : "");
      }
    }
  }
}

// Dummy experts: projection p is one [E * rows, cols] draw of seed + p (ops.h), so the CPU
// backend's dummy experts are the same values.
TEST_P(CudaMoe, DummyExpertsEqualTheCpuBackends) {
  const int E = 6, k = 2, T = 5;
  const int64_t H = 64, F = 32;
  ops::MoeExperts shape;
  shape.num_experts = E, shape.hidden = H, shape.ffn = F;
  for (int e = 0; e < E; ++e) {
    shape.gate.push_back(Tensor(nullptr, DType::BF16, {F, H}));
    shape.up.push_back(Tensor(nullptr, DType::BF16, {F, H}));
    shape.down.push_back(Tensor(nullptr, DType::BF16, {H, F}));
  }
  const ops::MoeExperts g = gpu->prepare_experts(shape, 77, keep);
  const ops::MoeExperts c = cpu->prepare_experts(shape, 77, keep);
  settle(*gpu);
  std::mt19937 rng(13);
  std::vector<float> x = rand_act(rng, size_t(T * H), act);
  const std::vector<int32_t> ex = {0, 5, 3, 1, 2, 4, 1, 0, 5, 4};
  const std::vector<float> wt = {0.6f, 0.4f, 0.5f, 0.5f, 0.9f, 0.1f, 0.3f, 0.7f, 0.2f, 0.8f};
  std::vector<float> want(size_t(T * H));
  cpu::ref::moe_experts(x.data(), T, c, ex.data(), wt.data(), k, want.data());
  DevTensor dx = dev_from(*gpu, x, act, {T, H});
  DevInts dex = dev_ints(*gpu, ex);
  Buffer dwt = gpu->alloc(wt.size() * 4);
  gpu->copy_to_device(dwt.data(), wt.data(), wt.size() * 4);
  Buffer ws = gpu->alloc(gpu->moe_workspace_bytes(T, k, g));
  DevTensor out = dev_alloc(*gpu, DType::F32, {T, H});
  gpu->moe_experts(dx.t, g, dex.ptr(), dwt.as<float>(), k, ws.data(), out.t);
  // The CPU draws bf16 weights, fp16 runs round the same draws to fp16: bf16's bound either way.
  EXPECT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(H), act_tol(DType::BF16)));
}

// Route + experts captured once, replayed with other router logits: no host synchronisation and
// no launch shape that depends on the routes.
TEST_P(CudaMoe, GraphReplayFollowsNewRoutes) {
  std::mt19937 rng(14);
  const int E = 8, k = 2, T = 3;
  const int64_t H = 64, F = 48;
  Experts w = make_experts(rng, act, E, H, F);
  const ops::MoeExperts dev = gpu->prepare_experts(w.host, 0, keep);
  settle(*gpu);
  std::vector<float> x = rand_act(rng, size_t(T * H), act);
  DevTensor dx = dev_from(*gpu, x, act, {T, H});
  DevTensor logits = dev_alloc(*gpu, act, {T, E});
  DevInts dex = dev_ints(*gpu, std::vector<int32_t>(size_t(T * k), 0));
  Buffer dwt = gpu->alloc(size_t(T * k) * 4);
  Buffer ws = gpu->alloc(gpu->moe_workspace_bytes(T, k, dev));
  DevTensor out = dev_alloc(*gpu, DType::F32, {T, H});
  const int g = gpu->capture_graph([&] {
    gpu->moe_route(logits.t, k, true, dex.ptr(), dwt.as<float>());
    gpu->moe_experts(dx.t, dev, dex.ptr(), dwt.as<float>(), k, ws.data(), out.t);
  });
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<float> l = rand_act(rng, size_t(T * E), act, 3.0f);
    const std::vector<uint8_t> b = encode(l, act);
    gpu->copy_to_device(logits.t.data, b.data(), b.size());
    gpu->replay_graph(g);
    std::vector<int32_t> ex(size_t(T * k));
    std::vector<float> wt(size_t(T * k)), want(size_t(T * H));
    cpu::ref::moe_route(l.data(), T, E, k, true, ex.data(), wt.data());
    cpu::ref::moe_experts(x.data(), T, w.host, ex.data(), wt.data(), k, want.data());
    EXPECT_TRUE(close_rows(to_host(*gpu, out.t), want, size_t(H), act_tol(act))) << "replay " << rep;
  }
}

LL_INSTANTIATE_DTYPES(CudaMoe);

}  // namespace

