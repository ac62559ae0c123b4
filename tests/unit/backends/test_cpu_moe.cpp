// The CPU backend's mixture-of-experts ops (router top-k, experts over routed tokens) against
// the plain loops of cpu::ref, which the CUDA kernels will be tested against too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend_test_util.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/ref_ops.h"
#include "lite_llama/backend_options.h"

using namespace lite_llama;
using namespace lite_llama::test;
namespace ref = lite_llama::cpu::ref;

namespace {

std::unique_ptr<ops::Backend> backend() { return cpu::make_cpu_backend(2); }

Weight make_any(std::mt19937& rng, DType t, int64_t rows, int64_t cols, float sd) {
  if (t != DType::Q4_K) return make_weight(rng, t, rows, cols, sd);
  Weight w{t, rows, cols, {}};
  for (int64_t r = 0; r < rows; ++r) {
    auto row = random_kquant_row(rng, t, cols);
    w.bytes.insert(w.bytes.end(), row.begin(), row.end());
  }
  return w;
}

struct Experts {
  std::vector<Weight> store;
  ops::MoeExperts w;
};

Experts make_experts(std::mt19937& rng, DType t, int E, int64_t H, int64_t F) {
  Experts x;
  x.store.reserve(size_t(3 * E));
  x.w.num_experts = E, x.w.hidden = H, x.w.ffn = F;
  for (int e = 0; e < E; ++e) {
    x.store.push_back(make_any(rng, t, F, H, 1.0f / std::sqrt(float(H))));
    x.w.gate.push_back(x.store.back().tensor());
    x.store.push_back(make_any(rng, t, F, H, 1.0f / std::sqrt(float(H))));
    x.w.up.push_back(x.store.back().tensor());
    x.store.push_back(make_any(rng, t, H, F, 1.0f / std::sqrt(float(F))));
    x.w.down.push_back(x.store.back().tensor());
  }
  return x;
}

}  // namespace

TEST(CpuMoe, RouteMatchesReference) {
  auto be = backend();
  std::mt19937 rng(7);
  for (auto [E, k] : std::vector<std::pair<int, int>>{{8, 2}, {128, 8}, {4, 4}, {3, 1}, {60, 4}})
    for (bool norm : {false, true})
      for (int64_t T : {1, 9, 64}) {
        auto logits = randn(rng, size_t(T * E), 2.0f);
        std::vector<int32_t> got_e(size_t(T * k), -1), want_e(size_t(T * k));
        std::vector<float> got_w(size_t(T * k), NAN), want_w(size_t(T * k));
        be->moe_route(Tensor(logits.data(), DType::F32, {T, E}), k, norm, got_e.data(), got_w.data());
        ref::moe_route(logits.data(), T, E, k, norm, want_e.data(), want_w.data());
        for (size_t i = 0; i < got_e.size(); ++i) {
          ASSERT_EQ(got_e[i], want_e[i]) << "E=" << E << " k=" << k << " T=" << T << " i=" << i;
          ASSERT_NEAR(got_w[i], want_w[i], 1e-6 * std::max(1.0f, want_w[i])) << "E=" << E << " i=" << i;
        }
        // The definition, checked directly: weights descending, each kept probability at least
        // every dropped one, and renormalised weights summing to one.
        for (int64_t t = 0; t < T; ++t) {
          float sum = 0;
          for (int j = 0; j < k; ++j) {
            sum += got_w[size_t(t * k + j)];
            if (j) ASSERT_GE(got_w[size_t(t * k + j - 1)], got_w[size_t(t * k + j)]);
          }
          if (norm) ASSERT_NEAR(sum, 1.0f, 1e-6f);
          const float* l = logits.data() + t * E;
          const float kth = l[got_e[size_t(t * k + k - 1)]];
          for (int e = 0; e < E; ++e)
            if (std::find(&got_e[size_t(t * k)], &got_e[size_t(t * k + k)], e) == &got_e[size_t(t * k + k)])
              ASSERT_LE(l[e], kth);
        }
      }
}

TEST(CpuMoe, RouteTiesPickLowestIndex) {
  auto be = backend();
  std::vector<float> logits = {1, 3, 3, 0, 3, 1};
  std::vector<int32_t> e(3);
  std::vector<float> w(3);
  be->moe_route(Tensor(logits.data(), DType::F32, {1, 6}), 3, true, e.data(), w.data());
  EXPECT_EQ(e, (std::vector<int32_t>{1, 2, 4}));
  for (float v : w) EXPECT_NEAR(v, 1.0f / 3, 1e-7);
}

// Experts in every weight type the CPU computes with, token counts from decode (1) to a prefill
// chunk, top-k from 1 to all experts (some experts get no token, some several).
TEST(CpuMoe, ExpertsMatchReference) {
  auto be = backend();
  std::mt19937 rng(3);
  struct Case {
    DType t;
    int64_t H, F;
  };
  for (Case c : {Case{DType::F32, 48, 40}, Case{DType::BF16, 64, 96}, Case{DType::F16, 32, 24},
                 Case{DType::Q8_0, 64, 96}, Case{DType::Q4_0, 96, 64}, Case{DType::Q4_K, 256, 256}})
    for (auto [E, k] : std::vector<std::pair<int, int>>{{8, 2}, {4, 4}, {6, 1}}) {
      Experts ex = make_experts(rng, c.t, E, c.H, c.F);
      for (int64_t T : {1, 5, 33}) {
        auto x = randn(rng, size_t(T * c.H));
        auto logits = randn(rng, size_t(T * E), 2.0f);
        std::vector<int32_t> route_e(size_t(T * k));
        std::vector<float> route_w(size_t(T * k));
        ref::moe_route(logits.data(), T, E, k, true, route_e.data(), route_w.data());
        std::vector<uint8_t> ws(be->moe_workspace_bytes(int(T), k, ex.w));
        std::vector<float> got(size_t(T * c.H), NAN), want(got.size());
        be->moe_experts(Tensor(x.data(), DType::F32, {T, c.H}), ex.w, route_e.data(), route_w.data(), k,
                        ws.data(), Tensor(got.data(), DType::F32, {T, c.H}));
        ref::moe_experts(x.data(), T, ex.w, route_e.data(), route_w.data(), k, want.data());
        // fp32 dot products of <= 256 terms against the reference's double sums: relative
        // error ~ n u of each product chain; 2e-5 of the output's scale is ~100x that bound's
        // typical value and far below what a wrong expert or weight changes (O(1)).
        double scale = 0;
        for (float v : want) scale = std::max(scale, double(std::fabs(v)));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-5 * scale + 1e-7)
              << dtype_name(c.t) << " E=" << E << " k=" << k << " T=" << T << " i=" << i;
      }
    }
}

TEST(CpuMoe, ExpertsRejectAnExpertOutOfRange) {
  auto be = backend();
  std::mt19937 rng(5);
  Experts ex = make_experts(rng, DType::F32, 4, 32, 32);
  auto x = randn(rng, 32);
  std::vector<float> out(32);
  std::vector<int32_t> route = {1, 4};
  std::vector<float> w = {0.5f, 0.5f};
  std::vector<uint8_t> ws(be->moe_workspace_bytes(1, 2, ex.w));
  EXPECT_THROW(be->moe_experts(Tensor(x.data(), DType::F32, {1, 32}), ex.w, route.data(), w.data(), 2,
                               ws.data(), Tensor(out.data(), DType::F32, {1, 32})),
               std::exception);
}

// Dummy experts (data == nullptr in the host form) are drawn by the backend: bf16, one buffer
// per projection, different values per expert, in +-1/sqrt(in_features).
TEST(CpuMoe, DummyExpertsAreDrawnByTheBackend) {
  auto be = backend();
  ops::MoeExperts host;
  host.num_experts = 3, host.hidden = 64, host.ffn = 16;
  for (int e = 0; e < 3; ++e) {
    host.gate.push_back(Tensor(nullptr, DType::BF16, {16, 64}));
    host.up.push_back(Tensor(nullptr, DType::BF16, {16, 64}));
    host.down.push_back(Tensor(nullptr, DType::BF16, {64, 16}));
  }
  std::vector<Buffer> keep;
  ops::MoeExperts w = be->prepare_experts(host, 42, keep);
  ASSERT_EQ(w.gate.size(), 3u);
  std::vector<float> a(64), b(64);
  dequantize_row(DType::BF16, w.gate[0].data, a.data(), 64);
  dequantize_row(DType::BF16, w.gate[1].data, b.data(), 64);
  EXPECT_NE(a, b);
  for (float v : a) EXPECT_LE(std::fabs(v), 1.0f / 8 + 1e-3f);
  std::vector<float> d(16);
  dequantize_row(DType::BF16, w.down[2].row(63), d.data(), 16);
  for (float v : d) EXPECT_LE(std::fabs(v), 0.25f + 1e-3f);
  EXPECT_EQ(w.down[2].shape[0], 64);
  EXPECT_EQ(w.down[2].shape[1], 16);
}

// CpuTuning::q8_activations: Q8_0/Q4_0 experts go through the backend's int8-activation linear
// per expert. Bounded against the reference by the activations' int8 rounding (~1% of the
// scale), and measurably different from the fp32 path, so the test knows which path ran.
TEST(CpuMoe, Int8ActivationPath) {
  CpuTuning tuning;
  tuning.q8_activations = true;
  auto q8 = cpu::make_cpu_backend(2, tuning);
  auto f32 = backend();
  std::mt19937 rng(11);
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    const int E = 6, k = 2;
    const int64_t H = 64, F = 96, T = 7;
    Experts ex = make_experts(rng, t, E, H, F);
    auto x = randn(rng, size_t(T * H));
    auto logits = randn(rng, size_t(T * E), 2.0f);
    std::vector<int32_t> re(size_t(T * k));
    std::vector<float> rw(size_t(T * k));
    ref::moe_route(logits.data(), T, E, k, true, re.data(), rw.data());
    std::vector<uint8_t> ws(q8->moe_workspace_bytes(int(T), k, ex.w));
    std::vector<float> a(size_t(T * H)), b(a.size()), want(a.size());
    q8->moe_experts(Tensor(x.data(), DType::F32, {T, H}), ex.w, re.data(), rw.data(), k, ws.data(),
                    Tensor(a.data(), DType::F32, {T, H}));
    f32->moe_experts(Tensor(x.data(), DType::F32, {T, H}), ex.w, re.data(), rw.data(), k, ws.data(),
                     Tensor(b.data(), DType::F32, {T, H}));
    ref::moe_experts(x.data(), T, ex.w, re.data(), rw.data(), k, want.data());
    double scale = 0, diff_q8 = 0, diff_paths = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, double(std::fabs(want[i])));
      diff_q8 = std::max(diff_q8, double(std::fabs(a[i] - want[i])));
      diff_paths = std::max(diff_paths, double(std::fabs(a[i] - b[i])));
    }
    EXPECT_LT(diff_q8, 3e-2 * scale) << dtype_name(t);
    EXPECT_GT(diff_paths, 1e-4 * scale) << dtype_name(t);
  }
}

// A forced kernel set (CpuTuning::isa) holds for the experts too. The generic set has no SIMD
// tiles: each output is the plain loop's fp32 sum in k order (no FMA in that file), which this
// test repeats exactly; AVX2 / AVX-512 tiles sum in another order and differ in the last bits.
TEST(CpuMoe, ForcedGenericKernelSetComputesTheExperts) {
  CpuTuning tn;
  tn.isa = CpuIsaChoice::Generic;
  auto be = cpu::make_cpu_backend(2, tn);
  std::mt19937 rng(11);
  const int64_t H = 256, F = 128, T = 3;
  Experts ex = make_experts(rng, DType::F32, 1, H, F);
  auto x = randn(rng, size_t(T * H));
  std::vector<int32_t> route_e(size_t(T), 0);
  std::vector<float> route_w(size_t(T), 1.0f);
  std::vector<uint8_t> ws(be->moe_workspace_bytes(int(T), 1, ex.w));
  std::vector<float> got(size_t(T * H), NAN);
  be->moe_experts(Tensor(x.data(), DType::F32, {T, H}), ex.w, route_e.data(), route_w.data(), 1, ws.data(),
                  Tensor(got.data(), DType::F32, {T, H}));
  auto dot = [](const float* w, const float* v, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) {
      volatile float p = w[i] * v[i];  // rounded on its own, as without FMA
      s += p;
    }
    return s;
  };
  const std::vector<float> gw = ex.store[0].values(), uw = ex.store[1].values(), dw = ex.store[2].values();
  int diff = 0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> h(static_cast<size_t>(F));
    for (int64_t f = 0; f < F; ++f) {
      const float g = dot(gw.data() + f * H, x.data() + t * H, H), u = dot(uw.data() + f * H, x.data() + t * H, H);
      h[size_t(f)] = g / (1.0f + std::exp(-g)) * u;
    }
    for (int64_t i = 0; i < H; ++i) diff += got[size_t(t * H + i)] != dot(dw.data() + i * F, h.data(), F);
  }
  EXPECT_EQ(diff, 0) << "outputs not from the generic kernels";
}
