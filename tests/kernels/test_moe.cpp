// Mixture of experts on CUDA against the CPU reference loops (cpu::ref::moe_route / moe_experts)
// on the same values: the router's top-k (experts exactly, weights to fp32 rounding) with and
// without renormalisation, ties and expert counts that are not multiples of 32; the experts of
// every token (stacked 16-bit weights; the sort-free grouped GEMV and the expert-sorted
// tensor-core GEMM; the grouped GEMV on tensor cores; the weighted combine in ascending expert
// order) for decode-sized and prefill-sized token
// counts, fp32 and 16-bit outputs; batch-64-sized GEMV steps with several row groups a block;
// dummy experts drawn as ops.h specifies; and the whole layer captured in a CUDA graph and
// replayed on new routes. Quantised experts (--quantize int8: int8 rows with a scale per row;
// --quantize fp8: e4m3 rows with a scale per row; --quantize int4: int4 in groups of 128 or 32;
// GGUF Q4_0 / Q4_1 / Q8_0 blocks repacked; int8 in groups of 16 as Q6_K gives; an fp8
// checkpoint's rows): both paths against the reference on the weights read back from the device
// and dequantised on the host, or on the file's blocks (so only the 16-bit rounding separates
// them). Helpers: moe_test_util.h.
#include "backends/cpu/ref_ops.h"
#include "core/error.h"
#include "core/gq.h"
#include "kernels/cuda_test_util.h"
#include "kernels/moe_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

class CudaMoe : public CudaVsCpu {};

const std::vector<int> kTokenCounts = {1, 4, 37, 300, 400};
// Around the default GEMV / GEMM threshold of quantised experts (1 assignment an expert: 12 of
// 12 experts x top 3 is 4 tokens, 5 tokens take the GEMM), and past it.
const std::vector<int> kQuantTokenCounts = {1, 4, 5, 37, 300, 400};

// Backends of one --quantize mode on the three paths: the default threshold, the GEMV for every
// step it takes (up to 1,024 assignments) and the GEMM for every step. keep[i] holds be[i]'s
// weights (declared after be: freed first).
struct Paths {
  std::unique_ptr<ops::Backend> be[3];
  std::vector<Buffer> keep[3];
  const char* name[3] = {"", " (GEMV forced)", " (GEMM forced)"};
};
Paths paths(const std::string& dtype, const std::string& mode) {
  Paths p;
  for (int i = 0; i < 3; ++i) {
    CudaTuning t;
    t.moe_gemv_max_assign = i == 0 ? -1 : i == 1 ? 1024 : 0;
    p.be[i] = make_gpu_quantized(dtype, mode, t);
  }
  return p;
}

// Experts as a file stores them: gate (j = 2e) and up (j = 2e + 1) of type gate_up[j % size],
// down of down[e % size], quantised from random values by the engine's reference quantisers
// (GGUF blocks, or GQ rows as GPTQ-style checkpoints load).
struct FileExperts {
  std::vector<std::vector<uint8_t>> bytes;
  ops::MoeExperts host;
};
FileExperts file_experts(std::mt19937& rng, int E, int64_t H, int64_t F, const std::vector<DType>& gate_up,
                         const std::vector<DType>& down) {
  FileExperts x;
  x.host.num_experts = E, x.host.hidden = H, x.host.ffn = F;
  auto part = [&](DType t, int64_t rows, int64_t K) {
    const std::vector<float> v = randn(rng, size_t(rows * K), 1.0f / std::sqrt(float(K)));
    const size_t rb = row_bytes(t, K);
    std::vector<uint8_t>& b = x.bytes.emplace_back(rb * size_t(rows));
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, v.data() + r * K, b.data() + size_t(r) * rb, K);
    return Tensor(b.data(), t, {rows, K});  // the buffer stays where it is when x.bytes grows
  };
  for (int e = 0; e < E; ++e) {
    x.host.gate.push_back(part(gate_up[size_t(2 * e) % gate_up.size()], F, H));
    x.host.up.push_back(part(gate_up[size_t(2 * e + 1) % gate_up.size()], F, H));
    x.host.down.push_back(part(down[size_t(e) % down.size()], H, F));
  }
  return x;
}

// be's moe_experts on `dev` for one step (tokens x, routes ex with weights wt, k a token) against
// want, fp32 and 16-bit outputs; returns the fp32 one.
std::vector<float> expect_step_matches(ops::Backend& be, const ops::MoeExperts& dev, int k, const std::vector<float>& x,
                                       const std::vector<int32_t>& ex, const std::vector<float>& wt,
                                       const std::vector<float>& want, DType act, const std::string& what) {
  const int T = int(ex.size()) / k;
  const int64_t H = dev.hidden;
  DevTensor dx = dev_from(be, x, act, {T, H});
  DevInts dex = dev_ints(be, ex);
  Buffer dwt = be.alloc(wt.size() * 4);
  be.copy_to_device(dwt.data(), wt.data(), wt.size() * 4);
  Buffer ws = be.alloc(be.moe_workspace_bytes(T, k, dev));
  std::vector<float> f32;
  for (DType out_t : {DType::F32, act}) {
    DevTensor out = dev_alloc(be, out_t, {T, H});
    poison(be, out.t);
    be.moe_experts(dx.t, dev, dex.ptr(), dwt.as<float>(), k, ws.data(), out.t);
    std::vector<float> got = to_host(be, out.t);
    // The gate|up products and the SwiGLU output are rounded to 16 bits on the device.
    EXPECT_TRUE(close_rows(got, want, size_t(H), act_tol(act))) << T << " tokens, H " << H << " F " << dev.ffn << what;
    if (out_t == DType::F32) f32 = std::move(got);
  }
  return f32;
}

// be's moe_experts on `dev` against cpu::ref::moe_experts on `ref` (the same weights), or with
// `ref_be` (a CPU backend) its moe_experts on `ref` (prepared by it); every token routed to k distinct
// experts: decode steps, more assignments per expert than a GEMV chunk or a GEMM tile holds, and
// 1,200 assignments (past the GEMV's limit); fp32 and 16-bit outputs.
void expect_experts_match(ops::Backend& be, const ops::MoeExperts& dev, const ops::MoeExperts& ref, int k,
                          std::mt19937& rng, DType act, const std::string& what,
                          const std::vector<int>& token_counts = kTokenCounts, ops::Backend* ref_be = nullptr) {
  const int E = ref.num_experts;
  const int64_t H = ref.hidden;
  for (int T : token_counts) {
    std::vector<float> x = rand_act(rng, size_t(T) * size_t(H), act);
    std::vector<int32_t> ex(size_t(T * k));
    std::vector<float> wt(size_t(T * k));
    for (int t = 0; t < T; ++t) {
      const std::vector<int32_t> d = distinct(rng, E, k);  // k different experts, any order
      for (int j = 0; j < k; ++j) ex[size_t(t * k + j)] = d[size_t(j)], wt[size_t(t * k + j)] = 0.2f + 0.3f * float(j);
    }
    std::vector<float> want(size_t(T) * size_t(H));
    if (ref_be) {
      Buffer cws = ref_be->alloc(ref_be->moe_workspace_bytes(T, k, ref));
      ref_be->moe_experts(host_f32(x, {T, H}), ref, ex.data(), wt.data(), k, cws.data(), host_f32(want, {T, H}));
    } else {
      cpu::ref::moe_experts(x.data(), T, ref, ex.data(), wt.data(), k, want.data());
    }
    expect_step_matches(be, dev, k, x, ex, wt, want, act, what);
  }
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
    expect_experts_match(*be, dev, w.host, k, rng, act, be == gemm_gpu.get() ? " (GEMM forced)" : "");
  }
}

// Steps of many assignments on the grouped GEMV (forced for int8 rows too) with one and with 3
// row groups a block (CudaTuning::moe_gemv_row_groups; 3 divides no matrix's count: 16-bit
// gate|up 144 rows = 5 groups of 32, down 200 = 7, the last ones partial; int8 256 = 8 and 160 =
// 5): 64 tokens x top 8 over 128 experts, routed at random (about 4 assignments an expert: the
// activations staged once for all of a block's groups), then with expert 7 in every token and
// 100 in every third (64 and 22+ assignments: several kChunk passes, restaged per group).
// Four GPU backends of one --quantize mode ("none": 16-bit) whose tunings tune(i, t) sets (on
// top of the grouped GEMV for every decode-sized step), each with `host`'s experts prepared.
struct FourBackends {
  std::unique_ptr<ops::Backend> be[4];
  std::vector<Buffer> keep[4];  // freed before be
  ops::MoeExperts dev[4];
  template <typename Tune>
  FourBackends(const std::string& dtype, const std::string& mode, const ops::MoeExperts& host, Tune tune) {
    for (int i = 0; i < 4; ++i) {
      CudaTuning t;
      t.moe_gemv_max_assign = 1024;
      tune(i, t);
      be[i] = make_gpu_quantized(dtype, mode, t);
      dev[i] = be[i]->prepare_experts(host, 0, keep[i]);
      settle(*be[i]);
    }
  }
};

// Against the reference, and 3 groups bitwise equal to 1 (each output's sum is the same), on
// FMAs and on tensor cores (CudaTuning::moe_gemv_mma; int8 rows keep the FMAs).
TEST_P(CudaMoe, GemvRowGroupsMatchReference) {
  const int E = 128, k = 8, T = 64;
  std::mt19937 rng(24);
  for (const std::string mode : {"none", "int8"}) {
    const int64_t H = mode == "int8" ? 160 : 200, F = mode == "int8" ? 128 : 72;
    Experts w = make_experts(rng, act, E, H, F);
    FourBackends fb(GetParam(), mode, w.host, [](int i, CudaTuning& t) {
      t.moe_gemv_row_groups = i % 2 == 0 ? 1 : 3, t.moe_gemv_mma = i >= 2;
    });
    auto& be = fb.be;
    auto& dev = fb.dev;
    const Experts d = mode == "int8" ? dequantized(*be[0], dev[0]) : Experts{};
    const ops::MoeExperts& ref = mode == "int8" ? d.host : w.host;
    for (const bool hot : {false, true}) {
      const std::vector<float> x = rand_act(rng, size_t(T) * size_t(H), act);
      std::vector<int32_t> ex;
      std::vector<float> wt;
      for (int t = 0; t < T; ++t) {
        std::vector<int32_t> dd = distinct(rng, E, k);
        auto put = [&](size_t j, int32_t e) {  // expert e at slot j, the slots still distinct
          if (const auto it = std::find(dd.begin(), dd.end(), e); it != dd.end())
            std::swap(*it, dd[j]);
          else
            dd[j] = e;
        };
        if (hot) put(0, 7);
        if (hot && t % 3 == 0) put(1, 100);
        for (int j = 0; j < k; ++j) ex.push_back(dd[size_t(j)]), wt.push_back(0.2f + 0.3f * float(j));
      }
      std::vector<float> want(size_t(T) * size_t(H));
      cpu::ref::moe_experts(x.data(), T, ref, ex.data(), wt.data(), k, want.data());
      std::vector<float> got[4];
      for (int i = 0; i < 4; ++i)
        got[i] = expect_step_matches(*be[i], dev[i], k, x, ex, wt, want, act,
                                     " " + mode + (hot ? " hot experts" : "") + (i % 2 ? " 3 row groups" : "") +
                                         (i >= 2 ? " mma" : ""));
      EXPECT_EQ(got[0], got[1]) << mode << (hot ? " hot experts" : "");
      EXPECT_EQ(got[2], got[3]) << mode << (hot ? " hot experts" : "") << " mma";
    }
  }
}

// Decode-sized steps on the tensor-core grouped GEMV (CudaTuning::moe_gemv_mma): 1, 4 and 13
// tokens, top 8 of 40 experts, against the reference; H 200 and F 72 leave partial 32-weight
// chunks (K 200 and 72) and partial 32-row groups (144 and 200 rows); H 1,064 (> 1,024: the
// 4-chunks-in-flight variant for the gate|up product) a partial chunk after 33 full ones.
TEST_P(CudaMoe, GemvOnTensorCoresMatchesReference) {
  const int E = 40, k = 8;
  std::mt19937 rng(31);
  for (const auto& [H, F] : {std::pair<int64_t, int64_t>{200, 72}, std::pair<int64_t, int64_t>{1064, 40}}) {
    Experts w = make_experts(rng, act, E, H, F);
    CudaTuning t;
    t.moe_gemv_max_assign = 1024, t.moe_gemv_mma = true;
    std::unique_ptr<ops::Backend> be = make_gpu(GetParam(), t);
    std::vector<Buffer> be_keep;  // freed before be
    const ops::MoeExperts dev = be->prepare_experts(w.host, 0, be_keep);
    settle(*be);
    expect_experts_match(*be, dev, w.host, k, rng, act, " (mma, H " + std::to_string(H) + ")", {1, 4, 13});
  }
}

// The tensor-core GEMV with its first weights requested before the prologue and the next row
// group's before the sums meet (CudaTuning::moe_gemv_preload), and with 3 row groups a block in
// steps of up to 16 assignments (moe_gemv_few_row_groups): against the reference and bitwise equal
// to the plain kernel. 1, 2 and 13 tokens, top 8 of 40 experts; H 200 / F 72 (both products
// preload: K <= 1,024) and H 1,064 / F 40 (the gate|up product at K > 1,024 does not).
TEST_P(CudaMoe, GemvPreloadAndFewRowGroupsEqualPlain) {
  const int E = 40, k = 8;
  std::mt19937 rng(33);
  for (const auto& [H, F] : {std::pair<int64_t, int64_t>{200, 72}, std::pair<int64_t, int64_t>{1064, 40}}) {
    Experts w = make_experts(rng, act, E, H, F);
    FourBackends fb(GetParam(), "none", w.host, [](int i, CudaTuning& t) {
      t.moe_gemv_mma = true, t.moe_gemv_preload = i % 2 == 1, t.moe_gemv_few_row_groups = i >= 2 ? 3 : 1;
    });
    auto& be = fb.be;
    auto& dev = fb.dev;
    for (const int T : {1, 2, 13}) {
      const std::vector<float> x = rand_act(rng, size_t(T) * size_t(H), act);
      std::vector<int32_t> ex;
      std::vector<float> wt;
      for (int t = 0; t < T; ++t) {
        const std::vector<int32_t> d = distinct(rng, E, k);
        for (int j = 0; j < k; ++j) ex.push_back(d[size_t(j)]), wt.push_back(0.2f + 0.3f * float(j));
      }
      std::vector<float> want(size_t(T) * size_t(H));
      cpu::ref::moe_experts(x.data(), T, w.host, ex.data(), wt.data(), k, want.data());
      std::vector<float> got[4];
      for (int i = 0; i < 4; ++i) {
        const std::string what = std::string(i % 2 ? " preload" : "") + (i >= 2 ? " 3 row groups" : "");
        got[i] = expect_step_matches(*be[i], dev[i], k, x, ex, wt, want, act, what);
        EXPECT_EQ(got[i], got[0]) << T << " tokens, H " << H << what;
      }
    }
  }
}

// --quantize int8: the experts stacked as int8 rows with an fp16 scale per row (the dense int8
// layout, quantised on the device by its quantiser), through the GEMV and the forced GEMM. H and F
// multiples of 32 (the layout's), the GEMM's N tiles not: 544 rows of down (K 96, 3 k-tiles),
// 192 rows of gate|up (K 544: 17 k-tiles, past the 3-stage ring; 2 of the GEMV's 512-column
// steps for the first lanes).
TEST_P(CudaMoe, Int8ExpertsMatchReferenceOnTheirWeights) {
  std::mt19937 rng(15);
  const int E = 12, k = 3;
  CudaTuning all_gemm;
  all_gemm.moe_gemv_max_assign = 0;
  std::unique_ptr<ops::Backend> q = make_gpu_quantized(GetParam(), "int8");
  std::unique_ptr<ops::Backend> q_gemm = make_gpu_quantized(GetParam(), "int8", all_gemm);
  std::vector<Buffer> q_keep, gemm_keep;  // freed before their backends
  const DType int8_rows = gq_dtype(kInt8Rows);
  for (const auto& [H, F] : {std::pair<int64_t, int64_t>{96, 32}, std::pair<int64_t, int64_t>{544, 96}})
  for (ops::Backend* be : {q.get(), q_gemm.get()}) {
    Experts w = make_experts(rng, act, E, H, F);
    const ops::MoeExperts dev = be->prepare_experts(w.host, 0, be == q.get() ? q_keep : gemm_keep);
    settle(*be);
    ASSERT_EQ(dev.stacked_gate_up.dtype, int8_rows);
    ASSERT_EQ(dev.stacked_down.dtype, int8_rows);
    EXPECT_EQ(dev.stacked_gate_up.nbytes(), size_t(E * 2 * F) * size_t(H + 16));
    const Experts d = dequantized(*be, dev);
    // Really quantised (not the 16-bit values), to the nearest step of each row's own scale.
    EXPECT_LE(max_int8_error(w.gate, d.gate, H), 0.51);
    EXPECT_LE(max_int8_error(w.up, d.up, H), 0.51);
    EXPECT_LE(max_int8_error(w.down, d.down, F), 0.51);
    EXPECT_NE(w.down[0], d.down[0]);
    expect_experts_match(*be, dev, d.host, k, rng, act, be == q_gemm.get() ? " int8 (GEMM forced)" : " int8");
  }
}

// Dummy experts under --quantize int8: the draws of ops.h quantised like loaded ones.
TEST_P(CudaMoe, Int8DummyExpertsMatchReferenceOnTheirWeights) {
  const int E = 6, k = 2;
  const int64_t H = 64, F = 32;
  const ops::MoeExperts shape = dummy_shape(E, H, F);
  std::unique_ptr<ops::Backend> q = make_gpu_quantized(GetParam(), "int8");
  std::vector<Buffer> q_keep;
  const ops::MoeExperts g = q->prepare_experts(shape, 77, q_keep);
  settle(*q);
  ASSERT_EQ(g.stacked_gate_up.dtype, gq_dtype(kInt8Rows));
  const Experts d = dequantized(*q, g);
  // The CPU backend's dummy experts are the unquantised draws (bf16; fp16 runs round them).
  const std::vector<std::vector<float>> cg = cpu_dummy_gates(*cpu, shape, keep);
  // Half a step, plus the draws' own difference: the device draws in the activation type, the
  // CPU in the shape's bf16 (up to 2^-9 of amax apart with fp16 activations: 0.25 step).
  EXPECT_LE(max_int8_error(cg, d.gate, H), 0.5 + 127.0 / 512 + 0.02);
  std::mt19937 rng(16);
  expect_experts_match(*q, g, d.host, k, rng, act, " int8 dummy");
}

// --quantize fp8: the experts stacked as e4m3 rows with an fp16 scale per row (the dense fp8
// layout and quantiser, without the fp32 row scales of the dense fp8 GEMM); on the three paths,
// shapes as the int8 test's.
TEST_P(CudaMoe, Fp8ExpertsMatchReferenceOnTheirWeights) {
  std::mt19937 rng(22);
  const int E = 12, k = 3;
  Paths p = paths(GetParam(), "fp8");
  for (const auto& [H, F] : {std::pair<int64_t, int64_t>{96, 32}, std::pair<int64_t, int64_t>{544, 96}})
    for (int i = 0; i < 3; ++i) {
      Experts w = make_experts(rng, act, E, H, F);
      const ops::MoeExperts dev = p.be[i]->prepare_experts(w.host, 0, p.keep[i]);
      settle(*p.be[i]);
      ASSERT_EQ(dev.stacked_gate_up.dtype, DType::GF8);
      ASSERT_EQ(dev.stacked_down.dtype, DType::GF8);
      EXPECT_EQ(dev.stacked_gate_up.nbytes(), size_t(E * 2 * F) * size_t(H + 16));
      const Experts d = dequantized(*p.be[i], dev);
      // Really e4m3 (not the 16-bit values), to the nearest code of each row's own scale.
      EXPECT_LE(max_fp8_error(w.gate, d.gate, H), 1.02);
      EXPECT_LE(max_fp8_error(w.up, d.up, H), 1.02);
      EXPECT_LE(max_fp8_error(w.down, d.down, F), 1.02);
      EXPECT_NE(w.down[0], d.down[0]);
      expect_experts_match(*p.be[i], dev, d.host, k, rng, act, std::string(" fp8") + p.name[i], kQuantTokenCounts);
      p.keep[i].clear();
    }
}

// Dummy experts under --quantize fp8: the draws of ops.h quantised like loaded ones.
TEST_P(CudaMoe, Fp8DummyExpertsMatchReferenceOnTheirWeights) {
  const int E = 6, k = 2;
  const int64_t H = 64, F = 32;
  const ops::MoeExperts shape = dummy_shape(E, H, F);
  Paths p = paths(GetParam(), "fp8");
  const std::vector<std::vector<float>> cg = cpu_dummy_gates(*cpu, shape, keep);
  for (int i = 0; i < 3; ++i) {
    const ops::MoeExperts g = p.be[i]->prepare_experts(shape, 77, p.keep[i]);
    settle(*p.be[i]);
    ASSERT_EQ(g.stacked_gate_up.dtype, DType::GF8);
    ASSERT_EQ(g.stacked_down.dtype, DType::GF8);
    const Experts d = dequantized(*p.be[i], g);
    // Half a step, plus the draws' own difference (fp16 runs draw in fp16, the CPU in bf16: 2^-8
    // of |w| apart, 1/16 of a step).
    EXPECT_LE(max_fp8_error(cg, d.gate, H), 1.1);
    std::mt19937 rng(23);
    expect_experts_match(*p.be[i], g, d.host, k, rng, act, std::string(" fp8 dummy") + p.name[i], {1, 3, 4, 37});
  }
}

// --quantize int4: the experts stacked as int4 rows of the dense int4 format (groups of 128
// where K allows, else 64 or 32), quantised on the device by its quantiser; on the three paths.
// Groups of 128 for both matrices (K 256, 128); of 32 (K 544: 17 k-tiles, past the GEMM's ring;
// K 96); 128 for gate|up with 32 for down.
TEST_P(CudaMoe, Int4ExpertsMatchReferenceOnTheirWeights) {
  std::mt19937 rng(18);
  const int E = 12, k = 3;
  Paths p = paths(GetParam(), "int4");
  struct Shape {
    int64_t H, F;
    int group_gu, group_d;
  };
  for (const Shape sh : {Shape{256, 128, 128, 128}, Shape{544, 96, 32, 32}, Shape{384, 160, 128, 32}})
    for (int i = 0; i < 3; ++i) {
      const GqFormat fgu{GqKind::Int4, sh.group_gu}, fd{GqKind::Int4, sh.group_d};
      Experts w = make_experts(rng, act, E, sh.H, sh.F);
      const ops::MoeExperts dev = p.be[i]->prepare_experts(w.host, 0, p.keep[i]);
      settle(*p.be[i]);
      ASSERT_EQ(dev.stacked_gate_up.dtype, gq_dtype(fgu));
      ASSERT_EQ(dev.stacked_down.dtype, gq_dtype(fd));
      EXPECT_EQ(dev.stacked_gate_up.nbytes(), size_t(E * 2 * sh.F) * fgu.row_bytes(sh.H));
      EXPECT_EQ(dev.stacked_down.nbytes(), size_t(E * sh.H) * fd.row_bytes(sh.F));
      const Experts d = dequantized(*p.be[i], dev);
      // Really 4-bit, within what the int4 quantiser's clipping search moves a weight (30% of its
      // row's max|w|, as test_gq.cpp's QuantiseOnDevice bounds it).
      EXPECT_LE(max_row_error(w.gate, d.gate, sh.H), 0.3);
      EXPECT_LE(max_row_error(w.up, d.up, sh.H), 0.3);
      EXPECT_LE(max_row_error(w.down, d.down, sh.F), 0.3);
      EXPECT_GT(max_row_error(w.down, d.down, sh.F), 0.01);
      expect_experts_match(*p.be[i], dev, d.host, k, rng, act, std::string(" int4") + p.name[i], kQuantTokenCounts);
      p.keep[i].clear();
    }
}

// Dummy experts under --quantize int4: the draws of ops.h quantised like loaded ones (gate|up in
// groups of 128, down of 64). Default threshold: 6 assignments, 3 tokens on the GEMV.
TEST_P(CudaMoe, Int4DummyExpertsMatchReferenceOnTheirWeights) {
  const int E = 6, k = 2;
  const int64_t H = 128, F = 64;
  const ops::MoeExperts shape = dummy_shape(E, H, F);
  std::unique_ptr<ops::Backend> q = make_gpu_quantized(GetParam(), "int4");
  std::vector<Buffer> q_keep;
  const ops::MoeExperts g = q->prepare_experts(shape, 77, q_keep);
  settle(*q);
  ASSERT_EQ(g.stacked_gate_up.dtype, DType::GQ4_G128);
  ASSERT_EQ(g.stacked_down.dtype, DType::GQ4_G64);
  const Experts d = dequantized(*q, g);
  // The CPU's draws (bf16) 4-bit rounded as above; the device's fp16 draws differ from them by
  // 2^-9 of max|w| at most.
  EXPECT_LE(max_row_error(cpu_dummy_gates(*cpu, shape, keep), d.gate, H), 0.3);
  std::mt19937 rng(21);
  expect_experts_match(*q, g, d.host, k, rng, act, " int4 dummy", {1, 3, 4, 37});
}

// GGUF experts keep their blocks under the default --quantize auto: Q4_0 / Q4_1 repacked as int4
// in groups of 32, Q8_0 as int8 in groups of 32, the smallest common format where a matrix mixes
// types (one Q8_0 part makes it int8); on the three paths, against the CPU backend on the file's
// blocks. --quantize none dequantises them to 16 bits as before.
TEST_P(CudaMoe, GgufExpertsStayQuantized) {
  std::mt19937 rng(19);
  const int E = 8, k = 2;
  const int64_t H = 256, F = 96;
  Paths p = paths(GetParam(), "auto");
  struct Layer {
    std::vector<DType> gate_up, down;
    DType want_gate_up, want_down;
  };
  for (const Layer& L : {Layer{{DType::Q4_0, DType::Q4_1}, {DType::Q8_0}, DType::GQ4_G32, DType::GQ8_G32},
                         Layer{{DType::Q4_1, DType::Q8_0}, {DType::Q4_0, DType::Q4_1}, DType::GQ8_G32,
                               DType::GQ4_G32}}) {
    const FileExperts x = file_experts(rng, E, H, F, L.gate_up, L.down);
    const ops::MoeExperts c = cpu->prepare_experts(x.host, 0, keep);
    for (int i = 0; i < 3; ++i) {
      const ops::MoeExperts dev = p.be[i]->prepare_experts(x.host, 0, p.keep[i]);
      settle(*p.be[i]);
      ASSERT_EQ(dev.stacked_gate_up.dtype, L.want_gate_up);
      ASSERT_EQ(dev.stacked_down.dtype, L.want_down);
      expect_experts_match(*p.be[i], dev, c, k, rng, act, std::string(" GGUF") + p.name[i],
                           {1, 4, 5, 37, 300}, cpu.get());
      p.keep[i].clear();
    }
  }
  std::unique_ptr<ops::Backend> none = make_gpu_quantized(GetParam(), "none");
  std::vector<Buffer> none_keep;
  const FileExperts x = file_experts(rng, 2, 64, 32, {DType::Q4_0}, {DType::Q8_0});
  const ops::MoeExperts dev = none->prepare_experts(x.host, 0, none_keep);
  EXPECT_EQ(dev.stacked_gate_up.dtype, act);
  EXPECT_EQ(dev.stacked_down.dtype, act);
}

// Experts already in GQ layouts keep them: int8 in groups of 16 (what GGUF Q6_K repacks to) for
// gate|up, int4 in groups of 64 for down; an fp8 checkpoint's e4m3 rows with a scale per 128
// weights (128 x 128 blocks) or per row; on the three paths against the reference on the rows.
TEST_P(CudaMoe, GqFileExpertsKeepTheirGroups) {
  std::mt19937 rng(20);
  const int E = 8, k = 2;
  Paths p = paths(GetParam(), "auto");
  struct Layer {
    int64_t H, F;
    DType gate_up, down;
  };
  for (const Layer& L : {Layer{160, 128, DType::GQ8_G16, DType::GQ4_G64}, Layer{384, 128, DType::GF8_G128, DType::GF8}}) {
    const FileExperts x = file_experts(rng, E, L.H, L.F, {L.gate_up}, {L.down});
    for (int i = 0; i < 3; ++i) {
      const ops::MoeExperts dev = p.be[i]->prepare_experts(x.host, 0, p.keep[i]);
      settle(*p.be[i]);
      ASSERT_EQ(dev.stacked_gate_up.dtype, L.gate_up);
      ASSERT_EQ(dev.stacked_down.dtype, L.down);
      expect_experts_match(*p.be[i], dev, x.host, k, rng, act,
                           " GQ file " + std::string(dtype_name(L.gate_up)) + p.name[i], {1, 4, 5, 37, 300});
      p.keep[i].clear();
    }
  }
}

// int8, int4 and fp8 need H and F multiples of 32, as the dense layouts do; an explicit
// --quantize refuses experts a checkpoint has quantised already (an fp8 one here), as it refuses
// its dense weights.
TEST_P(CudaMoe, QuantizeModesForExperts) {
  std::mt19937 rng(17);
  const FileExperts fp8_file = file_experts(rng, 2, 64, 32, {DType::GF8}, {DType::GF8});
  for (const char* mode : {"int8", "int4", "fp8"}) {
    std::unique_ptr<ops::Backend> q = make_gpu_quantized(GetParam(), mode);
    std::vector<Buffer> q_keep;
    Experts w = make_experts(rng, act, 4, 96, 40);
    EXPECT_THROW(q->prepare_experts(w.host, 0, q_keep), Error) << mode;
    EXPECT_THROW(q->prepare_experts(fp8_file.host, 0, q_keep), Error) << mode;
  }
}

// Dummy experts: projection p is one [E * rows, cols] draw of seed + p (ops.h), so the CPU
// backend's dummy experts are the same values.
TEST_P(CudaMoe, DummyExpertsEqualTheCpuBackends) {
  const int E = 6, k = 2, T = 5;
  const int64_t H = 64, F = 32;
  const ops::MoeExperts shape = dummy_shape(E, H, F);
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

