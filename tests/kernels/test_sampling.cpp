// CUDA sampling (Backend::sample) against hand-computed distributions: greedy rows equal the
// argmax, penalties move the argmax as the CPU sampler's rules say, and the draws of many rows
// (same logits, different RNG counters) follow the probabilities left after top-k, top-p and
// min-p, computed here independently.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "kernels/cuda_test_util.h"

using namespace lite_llama;
using namespace lite_llama::kt;

namespace {

class CudaSampling : public ::testing::Test {
 protected:
  void SetUp() override {
    LL_REQUIRE_CUDA();
    gpu = make_gpu("bf16");
    gpu->reserve_sampling(4096, 4096);
  }
  // Runs sample() on `rows` copies of `logits` (V columns, `limit` drawable).
  std::vector<int32_t> draw(const std::vector<float>& logits, int rows, int limit,
                            ops::SampleRow base, const std::vector<int32_t>& pen_t = {},
                            const std::vector<int32_t>& pen_c = {}) {
    const int V = int(logits.size());
    std::vector<float> all;
    for (int r = 0; r < rows; ++r) all.insert(all.end(), logits.begin(), logits.end());
    DevTensor d = dev_from(*gpu, all, DType::F32, {int64_t(rows), int64_t(V)});
    std::vector<ops::SampleRow> params(size_t(rows), base);
    for (int r = 0; r < rows; ++r) {
      params[size_t(r)].counter = uint64_t(r);
      params[size_t(r)].pen_offset = 0;
      params[size_t(r)].pen_count = int(pen_t.size());
    }
    DevInts out = dev_ints(*gpu, std::vector<int32_t>(size_t(rows), -1));
    EXPECT_TRUE(gpu->sample(d.t, rows, limit, params, pen_t, pen_c, out.ptr()));
    return ints_to_host(*gpu, out.ptr(), size_t(rows));
  }
  std::unique_ptr<ops::Backend> gpu;
};

// Probabilities after temperature, top-k, top-p and min-p, in the CPU sampler's order.
std::vector<double> expected(const std::vector<float>& l, int limit, const ops::SampleRow& p) {
  const float mx = *std::max_element(l.begin(), l.begin() + limit);
  std::vector<double> pr(static_cast<size_t>(limit));
  for (int i = 0; i < limit; ++i) pr[size_t(i)] = std::exp((double(l[size_t(i)]) - mx) / p.temperature);
  std::vector<int> order(static_cast<size_t>(limit));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pr[size_t(a)] > pr[size_t(b)]; });
  size_t keep = size_t(limit);
  if (p.top_k > 0) keep = std::min(keep, size_t(p.top_k));
  if (p.top_p < 1) {
    double total = 0, mass = 0;
    for (size_t i = 0; i < keep; ++i) total += pr[size_t(order[i])];
    for (size_t i = 0; i < keep; ++i) {
      mass += pr[size_t(order[i])];
      if (mass >= p.top_p * total) {
        keep = i + 1;
        break;
      }
    }
  }
  std::vector<double> out(size_t(limit), 0.0);
  double z = 0;
  for (size_t i = 0; i < keep; ++i) {
    const int t = order[i];
    if (pr[size_t(t)] < p.min_p) continue;  // min-p relative to the top token (p = 1)
    out[size_t(t)] = pr[size_t(t)];
    z += pr[size_t(t)];
  }
  for (double& v : out) v /= z;
  return out;
}

// Frequencies within 5 standard deviations per token, and nothing outside the support.
void check_frequencies(const std::vector<int32_t>& got, const std::vector<double>& want) {
  std::vector<double> n(want.size(), 0.0);
  for (int32_t t : got) {
    ASSERT_GE(t, 0);
    ASSERT_LT(size_t(t), want.size());
    ASSERT_GT(want[size_t(t)], 0.0) << "token " << t << " is outside the allowed set";
    n[size_t(t)] += 1;
  }
  const double N = double(got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const double sd = std::sqrt(N * want[i] * (1 - want[i])) + 1.0;
    EXPECT_NEAR(n[i], N * want[i], 5 * sd) << "token " << i;
  }
}

std::vector<float> test_logits(int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> l(static_cast<size_t>(V));
  for (float& v : l) v = nd(rng);
  return l;
}

TEST_F(CudaSampling, GreedyRowsTakeTheArgmaxLowestIndexOnTies) {
  std::vector<float> l = test_logits(1000, 1);
  l[17] = l[400] = 50.f;  // a tie: the lower index wins
  ops::SampleRow p;
  p.temperature = 0;
  for (int32_t t : draw(l, 3, 1000, p)) EXPECT_EQ(t, 17);
  // top_k = 1 at temperature 1 is also the argmax.
  p.temperature = 1;
  p.top_k = 1;
  for (int32_t t : draw(l, 20, 1000, p)) EXPECT_TRUE(t == 17 || t == 400);
}

TEST_F(CudaSampling, PaddingColumnsAreNeverDrawn) {
  std::vector<float> l = test_logits(300, 2);
  for (int i = 250; i < 300; ++i) l[size_t(i)] = 100.f;  // columns past the tokenizer
  ops::SampleRow p;
  for (int32_t t : draw(l, 2000, 250, p)) ASSERT_LT(t, 250);
}

TEST_F(CudaSampling, DrawsFollowTheFilteredDistribution) {
  const std::vector<float> l = test_logits(64, 3);
  struct Case {
    float temp, top_p, min_p;
    int top_k;
  };
  for (const Case& c : {Case{1.0f, 1.0f, 0.0f, 0}, Case{0.7f, 1.0f, 0.0f, 0}, Case{1.0f, 1.0f, 0.0f, 5},
                        Case{1.0f, 0.8f, 0.0f, 0}, Case{1.3f, 0.9f, 0.0f, 10}, Case{1.0f, 1.0f, 0.1f, 0},
                        Case{2.0f, 0.95f, 0.05f, 20}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.temp << " top_p " << c.top_p << " min_p " << c.min_p
                                      << " top_k " << c.top_k);
    ops::SampleRow p;
    p.temperature = c.temp;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    p.seed = 1234;
    check_frequencies(draw(l, 4000, 64, p), expected(l, 64, p));
  }
}

TEST_F(CudaSampling, SameSeedAndCounterGiveTheSameToken) {
  const std::vector<float> l = test_logits(5000, 4);
  ops::SampleRow p;
  p.seed = 99;
  const std::vector<int32_t> a = draw(l, 200, 5000, p), b = draw(l, 200, 5000, p);
  EXPECT_EQ(a, b);
  p.seed = 100;
  EXPECT_NE(a, draw(l, 200, 5000, p));
  // Different counters (rows) draw different tokens from a flat distribution.
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 100u);
}

TEST_F(CudaSampling, PenaltiesFollowTheCpuRules) {
  std::vector<float> l(100, 0.f);
  l[5] = 4.f;   // the argmax
  l[6] = 3.f;
  l[7] = -1.f;
  ops::SampleRow p;
  p.temperature = 0;
  // Repetition penalty 2 over token 5 (seen in the prompt): 4 / 2 = 2 < 3 -> token 6 wins.
  p.repetition_penalty = 2.f;
  EXPECT_EQ(draw(l, 1, 100, p, {5}, {-1})[0], 6);
  // Negative logits are multiplied: token 7 goes from -1 to -2; the argmax stays 5.
  EXPECT_EQ(draw(l, 1, 100, p, {7}, {-1})[0], 5);
  // Presence 0.5 + frequency 0.3 x 3 over token 5 in the output: 4 - 1.4 = 2.6 < 3.
  p.repetition_penalty = 1.f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.3f;
  EXPECT_EQ(draw(l, 1, 100, p, {5}, {3})[0], 6);
  // A prompt-only token (-1) gets no presence/frequency penalty.
  EXPECT_EQ(draw(l, 1, 100, p, {5}, {-1})[0], 5);
}

}  // namespace

// Backend::score_rows against a double-precision log-softmax computed here: the target's logprob
// and rank, the argmax and the top k (value order, lower index first on ties), over rows of a
// 128k vocabulary with padding columns past `limit` and of an odd width (no vector loads).
TEST_F(CudaSampling, ScoreRowsMatchALogSoftmaxInDouble) {
  for (const auto [V, limit] : {std::pair{128256, 128000}, std::pair{4099, 4097}}) {
    const int rows = 6;
    std::vector<float> all;
    std::vector<int32_t> targets;
    for (int r = 0; r < rows; ++r) {
      // Values on a grid of 1/64 (exact in fp32), so ties are deliberate and ranks are exact.
      std::vector<float> l = test_logits(V, uint32_t(100 + r));
      for (float& v : l) v = std::round(v * 4 * 64) / 64;
      for (int i = limit; i < V; ++i) l[size_t(i)] = 99.f;  // padding: never reported
      l[size_t(7 + r)] = l[size_t(limit - 3)] = 60.f;      // a tie at the top
      l[size_t(300 + r)] = l[size_t(900 + r)] = 30.f;      // and one further down
      all.insert(all.end(), l.begin(), l.end());
      targets.push_back(r == 0 ? 7 : r == 1 ? limit - 3 : r == 2 ? 900 + r : int32_t((1000 * r + 11) % (limit - 10)));
    }
    DevTensor d = dev_from(*gpu, all, DType::F32, {int64_t(rows), int64_t(V)});
    for (int k : {0, 1, 5, 20}) {
      std::vector<ops::RowScore> out(static_cast<size_t>(rows));
      std::vector<ops::TopToken> top(static_cast<size_t>(rows * k));
      ASSERT_TRUE(gpu->score_rows(d.t, rows, limit, targets.data(), k, out.data(), top.data()));
      for (int r = 0; r < rows; ++r) {
        const float* l = all.data() + size_t(r) * size_t(V);
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < limit; ++i) mx = std::max(mx, double(l[i]));
        for (int i = 0; i < limit; ++i) sum += std::exp(double(l[i]) - mx);
        const double lse = mx + std::log(sum);
        const int t = targets[size_t(r)];
        int above = 0;
        for (int i = 0; i < limit; ++i) above += l[i] > l[t];
        std::vector<int> order(static_cast<size_t>(limit));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
        SCOPED_TRACE(testing::Message() << "V " << V << " row " << r << " k " << k);
        EXPECT_NEAR(out[size_t(r)].logprob, double(l[t]) - lse, 1e-4);
        EXPECT_EQ(out[size_t(r)].rank, above + 1);
        EXPECT_EQ(out[size_t(r)].argmax, 7 + r);
        for (int j = 0; j < k; ++j) {
          const ops::TopToken& e = top[size_t(r * k + j)];
          EXPECT_EQ(e.token, order[size_t(j)]) << "place " << j;
          EXPECT_NEAR(e.logprob, double(l[order[size_t(j)]]) - lse, 1e-4);
        }
      }
    }
  }
  // Rows past what reserve_sampling() reserved, or more top tokens than kMaxTopLogprobs: refused.
  std::vector<float> one(64, 0.f);
  DevTensor d = dev_from(*gpu, one, DType::F32, {1, 64});
  int32_t target = 3;
  ops::RowScore rs;
  std::vector<ops::TopToken> top(21);
  EXPECT_FALSE(gpu->score_rows(d.t, 1, 64, &target, ops::Backend::kMaxTopLogprobs + 1, &rs, top.data()));
  ASSERT_TRUE(gpu->score_rows(d.t, 1, 64, &target, 2, &rs, top.data()));
  EXPECT_NEAR(rs.logprob, -std::log(64.0), 1e-6);
  EXPECT_EQ(rs.rank, 1);  // all equal: nothing strictly higher
  EXPECT_EQ(top[0].token, 0);
  EXPECT_EQ(top[1].token, 1);
}

// Backend::keep_rows: the kept rows are the logits as they were, in the order asked, whatever
// sampling does to the logits afterwards (penalties change them in place); more rows than
// reserved are refused.
TEST_F(CudaSampling, KeptRowsStayAsTheLogitsWere) {
  const int V = 300, rows = 3;
  gpu->reserve_kept_rows(2, V);
  std::vector<float> all;
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> l = test_logits(V, uint32_t(200 + r));
    all.insert(all.end(), l.begin(), l.end());
  }
  DevTensor d = dev_from(*gpu, all, DType::F32, {rows, V});
  const std::vector<int32_t> which = {2, 0};
  Tensor kept;
  ASSERT_TRUE(gpu->keep_rows(d.t, which.data(), 2, &kept));
  ops::SampleRow p;
  p.repetition_penalty = 2.f;
  p.presence_penalty = 5.f;
  p.pen_count = 3;
  std::vector<ops::SampleRow> params(static_cast<size_t>(rows), p);
  DevInts out = dev_ints(*gpu, std::vector<int32_t>(static_cast<size_t>(rows), -1));
  ASSERT_TRUE(gpu->sample(d.t, rows, V, params, {5, 6, 7}, {1, 1, 1}, out.ptr()));
  const std::vector<float> now = to_host(*gpu, d.t), k = to_host(*gpu, kept);
  ASSERT_EQ(k.size(), size_t(2 * V));
  for (int i = 0; i < 2; ++i)
    for (int c = 0; c < V; ++c)
      ASSERT_EQ(k[size_t(i * V + c)], all[size_t(which[size_t(i)] * V + c)]) << "kept row " << i << " col " << c;
  EXPECT_NE(now[size_t(2 * V + 5)], all[size_t(2 * V + 5)]);  // the penalties did change the logits
  Tensor more;
  const std::vector<int32_t> three = {0, 1, 2};
  EXPECT_FALSE(gpu->keep_rows(d.t, three.data(), 3, &more));
}
