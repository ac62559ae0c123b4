// Grammar token masks and logit biases on the GPU (Backend::constrain_logits) against the same
// rule applied here by hand: cleared mask bits become -inf, biases add (twice when an entry
// repeats), columns past the mask's words are untouched; then greedy sampling of masked rows
// picks the best allowed token.
#include <cmath>
#include <random>

#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

TEST(CudaTokenMask, MasksAndBiasesMatchHostRule) {
  LL_REQUIRE_CUDA();
  auto gpu = make_gpu("bf16");
  const int rows = 5, V = 1000, limit = 990, words = (limit + 31) / 32;
  gpu->reserve_constraints(rows, words, 64);
  gpu->reserve_sampling(rows, 16);
  std::mt19937 rng(7);
  std::vector<float> logits = randn(rng, size_t(rows) * V);
  std::vector<uint32_t> masks(size_t(rows) * words);
  for (auto& m : masks) m = uint32_t(rng());
  for (int w = 0; w < words; ++w) masks[size_t(2 * words + w)] = ~0u;  // row 2: unconstrained
  for (int w = 0; w < words; ++w) masks[size_t(3 * words + w)] = 0;    // row 3: only token 77
  masks[size_t(3 * words + 77 / 32)] = 1u << (77 % 32);
  std::vector<ops::LogitBias> bias = {{0, 5, 3.5f}, {1, 999, -2.f}, {2, 10, 50.f}, {2, 10, 1.f}, {4, 0, -100.f}};

  std::vector<float> want = logits;
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < std::min(V, words * 32); ++t)
      if (!((masks[size_t(r * words + t / 32)] >> (t % 32)) & 1u)) want[size_t(r) * V + size_t(t)] = -INFINITY;
  for (const auto& b : bias) want[size_t(b.row) * V + size_t(b.token)] += b.bias;

  DevTensor d = dev_from(*gpu, logits, DType::F32, {rows, V});
  ASSERT_TRUE(gpu->constrain_logits(d.t, rows, masks.data(), words, bias));
  const std::vector<float> got = to_host(*gpu, d.t);
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_TRUE(std::isinf(got[i]) && got[i] < 0) << i;
    } else {
      EXPECT_FLOAT_EQ(got[i], want[i]) << i;
    }
  }

  // Greedy rows after the mask: the best allowed column below `limit`.
  std::vector<ops::SampleRow> params(static_cast<size_t>(rows));
  for (auto& p : params) p.temperature = 0;
  DevInts out = dev_ints(*gpu, std::vector<int32_t>(size_t(rows), -1));
  ASSERT_TRUE(gpu->sample(d.t, rows, limit, params, {}, {}, out.ptr()));
  const auto toks = ints_to_host(*gpu, out.ptr(), size_t(rows));
  for (int r = 0; r < rows; ++r) {
    int best = 0;
    for (int t = 1; t < limit; ++t)
      if (want[size_t(r) * V + size_t(t)] > want[size_t(r) * V + size_t(best)]) best = t;
    EXPECT_EQ(toks[size_t(r)], best) << "row " << r;
  }
  EXPECT_EQ(toks[3], 77);
  EXPECT_EQ(toks[2], 10);
  // Over the reserved capacity: refused, nothing changed.
  std::vector<ops::LogitBias> many(65, ops::LogitBias{0, 1, 1.f});
  EXPECT_FALSE(gpu->constrain_logits(d.t, rows, masks.data(), words, many));
}
