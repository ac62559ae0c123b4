// SequenceSampler: greedy, temperature / top-k / top-p / min-p (support and frequencies against
// hand-computed distributions), seeding, penalties, logprobs; SamplingParams::validate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "lite_llama/sampling_params.h"
#include "sampling/sampler.h"

using namespace lite_llama;
using lite_llama::sampling::SequenceSampler;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kVocab = 8;

// Hand-made distribution: p = 0.5, 0.25, 0.15, 0.1 on tokens 5, 2, 7, 0 (others -inf, as
// the engine masks padding rows). With temperature 1 the softmax of log(p) is p itself.
std::vector<float> base_logits() {
  std::vector<float> l(kVocab, kNegInf);
  l[5] = std::log(0.5f);
  l[2] = std::log(0.25f);
  l[7] = std::log(0.15f);
  l[0] = std::log(0.1f);
  return l;
}

SamplingParams params(float temperature, uint64_t seed = 1234) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

std::vector<int> draw_counts(const SamplingParams& p, const std::vector<float>& logits, int n) {
  SequenceSampler s(p, {});
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;  // sample() edits its input
    const int32_t t = s.sample(l.data(), int64_t(l.size()), nullptr, nullptr);
    EXPECT_TRUE(t >= 0 && t < int32_t(logits.size())) << t;
    if (t >= 0 && t < int32_t(logits.size())) ++counts[size_t(t)];
  }
  return counts;
}

// Tokens outside `want` must never be drawn; each wanted token's frequency must lie within
// 5 standard deviations of its probability (n = 40000: sd <= 0.0025), and the chi-square
// statistic must be below df + 6 sqrt(2 df) + 10 (far in the tail of chi2(df)). The seed is
// fixed, so the outcome is deterministic; the bounds only make a correct sampler pass by a
// wide margin while a wrong renormalisation (a few % off) fails.
void expect_distribution(const SamplingParams& p, const std::vector<float>& logits,
                         const std::map<int, double>& want, const char* what, int n = 40000) {
  auto counts = draw_counts(p, logits, n);
  double chi2 = 0;
  for (size_t t = 0; t < counts.size(); ++t) {
    auto it = want.find(int(t));
    if (it == want.end()) {
      EXPECT_EQ(counts[t], 0) << what << ": token " << t << " is outside the support";
      continue;
    }
    const double pr = it->second, f = double(counts[t]) / n;
    const double sd = std::sqrt(pr * (1 - pr) / n);
    EXPECT_NEAR(f, pr, 5 * sd + 1e-12) << what << ": token " << t;
    if (pr > 0) chi2 += (counts[t] - n * pr) * (counts[t] - n * pr) / (n * pr);
  }
  const double df = double(want.size()) - 1;
  if (df > 0) {
    EXPECT_LT(chi2, df + 6 * std::sqrt(2 * df) + 10) << what;
  }
}

}  // namespace

TEST(Sampler, ArgmaxFirstOnTies) {
  const float a[] = {1, 3, 3, 2};
  EXPECT_EQ(sampling::argmax(a, 4), 1);
  const float b[] = {kNegInf, -5, kNegInf, -5};
  EXPECT_EQ(sampling::argmax(b, 4), 1);
  const float c[] = {7};
  EXPECT_EQ(sampling::argmax(c, 1), 0);
}

TEST(Sampler, GreedyIsArgmax) {
  SequenceSampler s(params(0.0f), {});
  std::vector<float> l = base_logits();
  EXPECT_EQ(s.sample(l.data(), kVocab, nullptr, nullptr), 5);
  std::vector<float> tie = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
  EXPECT_EQ(s.sample(tie.data(), 5, nullptr, nullptr), 1);
  // Greedy ignores top-k / top-p / min-p and the seed.
  SamplingParams p = params(0.0f, 99);
  p.top_k = 3;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  SequenceSampler s2(p, {});
  std::vector<float> r = {0.1f, 0.3f, 0.2f, 0.29f};
  for (int i = 0; i < 10; ++i) {
    std::vector<float> c = r;
    EXPECT_EQ(s2.sample(c.data(), 4, nullptr, nullptr), 1);
  }
}

TEST(Sampler, TinyTemperatureIsGreedy) {
  // vLLM samples greedily below _SAMPLING_EPS = 1e-5; a subnormal temperature once made
  // 1 / t inf and every weight NaN, so the last token (3) came out instead of the argmax (1).
  const std::vector<float> r = {0.1f, 0.3f, 0.2f, 0.29f};
  for (float t : {1e-6f, 1e-40f, std::numeric_limits<float>::denorm_min()})
    for (uint64_t seed = 0; seed < 5; ++seed) {
      SequenceSampler s(params(t, seed), {});
      std::vector<float> c = r;
      EXPECT_EQ(s.sample(c.data(), 4, nullptr, nullptr), 1) << "temperature " << t;
    }
}

TEST(Sampler, TemperatureOneFollowsSoftmax) {
  expect_distribution(params(1.0f), base_logits(), {{5, 0.5}, {2, 0.25}, {7, 0.15}, {0, 0.1}},
                      "T=1");
}

TEST(Sampler, TemperatureReshapes) {
  // p_i^(1/T) renormalised. T = 2: sqrt(p) / sum sqrt(p); T = 0.5: p^2 / sum p^2
  // (sum p^2 = 0.345).
  expect_distribution(params(2.0f), base_logits(),
                      {{5, 0.3700903444}, {2, 0.2616933922}, {7, 0.2027068299}, {0, 0.1655094336}},
                      "T=2");
  expect_distribution(
      params(0.5f), base_logits(),
      {{5, 0.25 / 0.345}, {2, 0.0625 / 0.345}, {7, 0.0225 / 0.345}, {0, 0.01 / 0.345}}, "T=0.5");
}

TEST(Sampler, TopK) {
  SamplingParams p = params(1.0f);
  p.top_k = 2;  // {0.5, 0.25} -> {2/3, 1/3}
  expect_distribution(p, base_logits(), {{5, 2.0 / 3}, {2, 1.0 / 3}}, "top_k=2");
  p.top_k = 1;
  expect_distribution(p, base_logits(), {{5, 1.0}}, "top_k=1");
  p.top_k = 100;  // more than the vocabulary: no effect
  expect_distribution(p, base_logits(), {{5, 0.5}, {2, 0.25}, {7, 0.15}, {0, 0.1}}, "top_k=100");
}

TEST(Sampler, TopP) {
  SamplingParams p = params(1.0f);
  p.top_p = 0.7f;  // cumulative 0.5, 0.75 >= 0.7: keep two -> {2/3, 1/3}
  expect_distribution(p, base_logits(), {{5, 2.0 / 3}, {2, 1.0 / 3}}, "top_p=0.7");
  p.top_p = 0.8f;  // 0.5, 0.75, 0.9 >= 0.8: keep three -> / 0.9
  expect_distribution(p, base_logits(), {{5, 0.5 / 0.9}, {2, 0.25 / 0.9}, {7, 0.15 / 0.9}},
                      "top_p=0.8");
  p.top_p = 0.4f;  // the top token alone already covers 0.4
  expect_distribution(p, base_logits(), {{5, 1.0}}, "top_p=0.4");
}

TEST(Sampler, TopKThenTopPOnTheRenormalisedRest) {
  // top-k 3 keeps mass 0.9; top-p 0.8 of that is 0.72: 0.5, 0.75 >= 0.72 -> two tokens.
  SamplingParams p = params(1.0f);
  p.top_k = 3;
  p.top_p = 0.8f;
  expect_distribution(p, base_logits(), {{5, 2.0 / 3}, {2, 1.0 / 3}}, "top_k=3 top_p=0.8");
}

TEST(Sampler, MinP) {
  SamplingParams p = params(1.0f);
  p.min_p = 0.25f;  // cut 0.125: drops 0.1 -> {0.5, 0.25, 0.15} / 0.9
  expect_distribution(p, base_logits(), {{5, 0.5 / 0.9}, {2, 0.25 / 0.9}, {7, 0.15 / 0.9}},
                      "min_p=0.25");
  p.min_p = 0.45f;  // cut 0.225: {0.5, 0.25}
  expect_distribution(p, base_logits(), {{5, 2.0 / 3}, {2, 1.0 / 3}}, "min_p=0.45");
  p.min_p = 0.6f;  // cut 0.3: the top token only
  expect_distribution(p, base_logits(), {{5, 1.0}}, "min_p=0.6");
}

TEST(Sampler, MinPAppliesAfterTemperature) {
  // T = 2: weights sqrt(p) = 0.7071, 0.5, 0.3873, 0.3162; min_p 0.6 cuts at 0.4243 ->
  // {0.7071, 0.5} / 1.2071 = {2 - sqrt 2, sqrt 2 - 1}.
  SamplingParams p = params(2.0f);
  p.min_p = 0.6f;
  expect_distribution(p, base_logits(), {{5, 2 - std::sqrt(2.0)}, {2, std::sqrt(2.0) - 1}},
                      "T=2 min_p=0.6");
}

TEST(Sampler, TopPOverALargeVocabulary) {
  // 1000 tokens with a spread-out distribution: the nucleus holds several hundred tokens, more
  // than the sampler's first sorted batch (256). The nucleus is computed here independently
  // (full sort in double).
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int V = 1000;
  std::vector<float> logits(V);
  for (auto& x : logits) x = nd(rng);
  const float top_p = 0.9f;
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  const double mx = logits[size_t(order[0])];
  double total = 0;
  for (float l : logits) total += std::exp(double(l) - mx);
  double mass = 0;
  size_t keep = 0;
  while (keep < order.size()) {
    mass += std::exp(double(logits[size_t(order[keep++])]) - mx);
    if (mass >= top_p * total) break;
  }
  ASSERT_GT(keep, 300u) << "fixture should need more than the first sorted batch";
  // The boundary is not within rounding of the threshold: the sampler's fp32 weights carry a
  // relative error ~6e-8 each, so its sums are within 1e-6 of these.
  const double last = std::exp(double(logits[size_t(order[keep - 1])]) - mx);
  ASSERT_GT(mass - top_p * total, 1e-6 * total);
  ASSERT_GT(top_p * total - (mass - last), 1e-6 * total);
  std::map<int, double> want;
  for (size_t i = 0; i < keep; ++i)
    want[order[i]] = std::exp(double(logits[size_t(order[i])]) - mx) / mass;
  SamplingParams p = params(1.0f, 77);
  p.top_p = top_p;
  // Per-token frequencies are noisy at ~1/keep each; the support check and the chi-square
  // over all kept tokens carry this test.
  expect_distribution(p, logits, want, "top_p=0.9 V=1000", 20000);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  std::vector<float> flat(50, 0.0f);
  auto run = [&](uint64_t seed) {
    SequenceSampler s(params(1.0f, seed), {});
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> l = flat;
      out.push_back(s.sample(l.data(), 50, nullptr, nullptr));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  // A uniform distribution over 50 tokens: 200 draws cover many distinct tokens.
  auto seq = run(7);
  std::sort(seq.begin(), seq.end());
  EXPECT_GT(std::unique(seq.begin(), seq.end()) - seq.begin(), 30);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  // Prompt tokens 1 and 2 are penalised with 2.0: 4 -> 2, -2 -> -4; others unchanged.
  SamplingParams p = params(0.0f);
  p.repetition_penalty = 2.0f;
  SequenceSampler s(p, {1, 2, 1});
  std::vector<float> l = {1.0f, 4.0f, -2.0f, 3.0f, 0.0f};
  EXPECT_EQ(s.sample(l.data(), 5, nullptr, nullptr), 3);  // 3 beats the penalised 2
  EXPECT_EQ(l, (std::vector<float>{1.0f, 2.0f, -4.0f, 3.0f, 0.0f}));
  // A generated token joins the set, once however often it appears.
  s.accept(3);
  s.accept(3);
  std::vector<float> m = {1.0f, 4.0f, -2.0f, 3.0f, 0.0f};
  EXPECT_EQ(s.sample(m.data(), 5, nullptr, nullptr), 1);  // 2 vs 1.5 vs 1
  EXPECT_EQ(m, (std::vector<float>{1.0f, 2.0f, -4.0f, 1.5f, 0.0f}));
  // Penalty 1 leaves everything as it is.
  SequenceSampler off(params(0.0f), {1, 2});
  std::vector<float> n = {1.0f, 4.0f, -2.0f};
  off.accept(1);
  EXPECT_EQ(off.sample(n.data(), 3, nullptr, nullptr), 1);
  EXPECT_EQ(n, (std::vector<float>{1.0f, 4.0f, -2.0f}));
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountOutputTokensOnly) {
  // presence 0.5, frequency 0.25; outputs: 2 twice, 0 once. Prompt token 4 is not penalised.
  // logit[2] -= 0.5 + 2 * 0.25 = 1.0;  logit[0] -= 0.5 + 0.25 = 0.75.
  SamplingParams p = params(0.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  SequenceSampler s(p, {4, 4});
  s.accept(2);
  s.accept(0);
  s.accept(2);
  std::vector<float> l = {1.0f, 0.5f, 1.2f, 0.0f, 0.9f};
  EXPECT_EQ(s.sample(l.data(), 5, nullptr, nullptr), 4);  // 0.25, 0.5, 0.2, 0, 0.9
  // One fp32 subtraction each: 1e-6 is a few ulps at these magnitudes.
  EXPECT_NEAR(l[0], 0.25f, 1e-6);
  EXPECT_EQ(l[1], 0.5f);
  EXPECT_NEAR(l[2], 0.2f, 1e-6);
  EXPECT_EQ(l[3], 0.0f);
  EXPECT_EQ(l[4], 0.9f);
  // Negative values reward repetition.
  SamplingParams q = params(0.0f);
  q.presence_penalty = -1.0f;
  SequenceSampler r(q, {});
  r.accept(0);
  std::vector<float> m = {0.0f, 0.5f};
  EXPECT_EQ(r.sample(m.data(), 2, nullptr, nullptr), 0);
  EXPECT_FLOAT_EQ(m[0], 1.0f);
}

TEST(Sampler, RepetitionThenPresencePenalty) {
  // vLLM order: repetition (3 / 2 = 1.5) then presence (1.5 - 0.5 = 1.0).
  SamplingParams p = params(0.0f);
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  SequenceSampler s(p, {});
  s.accept(1);
  std::vector<float> l = {1.1f, 3.0f};
  EXPECT_EQ(s.sample(l.data(), 2, nullptr, nullptr), 0);
  EXPECT_FLOAT_EQ(l[1], 1.0f);
}

TEST(Sampler, LogprobsAgainstHandLogSoftmax) {
  // logits [1, 2, 3, 0]: log-sum-exp = ln(e + e^2 + e^3 + 1) = 3.4401896986.
  const float lse = 3.4401896986f;
  SamplingParams p = params(0.0f);
  p.top_logprobs = 2;
  SequenceSampler s(p, {});
  std::vector<float> l = {1, 2, 3, 0};
  float lp = 0;
  std::vector<sampling::TokenLogprob> top;
  EXPECT_EQ(s.sample(l.data(), 4, &lp, &top), 2);
  EXPECT_NEAR(lp, 3 - lse, 1e-6);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].token, 2);
  EXPECT_NEAR(top[0].logprob, 3 - lse, 1e-6);
  EXPECT_EQ(top[1].token, 1);
  EXPECT_NEAR(top[1].logprob, 2 - lse, 1e-6);

  // top_logprobs 0: the chosen token's logprob only.
  p.top_logprobs = 0;
  SequenceSampler s0(p, {});
  std::vector<float> l0 = {1, 2, 3, 0};
  top.assign(3, {9, 9});
  s0.sample(l0.data(), 4, &lp, &top);
  EXPECT_NEAR(lp, 3 - lse, 1e-6);
  EXPECT_EQ(top.size(), 3u) << "top must be left alone when no alternatives are asked";

  // Ties in the top list: lower token id first. [0, 0, 0]: each ln(1/3).
  std::vector<sampling::TokenLogprob> t3;
  float c = 0;
  const float z[] = {0, 0, 0};
  sampling::log_softmax_top(z, 3, 5, 1, &c, &t3);
  EXPECT_NEAR(c, -std::log(3.0f), 1e-6);
  ASSERT_EQ(t3.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t3[size_t(i)].token, i);
    EXPECT_NEAR(t3[size_t(i)].logprob, -std::log(3.0f), 1e-6);
  }
}

TEST(Sampler, LogprobsComeFromTheRawDistribution) {
  // The repetition penalty changes the choice (token 1: 2 / 4 = 0.5 < 1), but the reported
  // logprobs are those of the model's raw logits [1, 2, 3, 0] (as vLLM reports by default).
  const float lse = 3.4401896986f;
  SamplingParams p = params(0.0f);
  p.repetition_penalty = 4.0f;
  p.top_logprobs = 1;
  SequenceSampler s(p, {2});
  std::vector<float> l = {1, 2, 3, 0};  // penalised: [1, 2, 0.75, 0]
  float lp = 0;
  std::vector<sampling::TokenLogprob> top;
  EXPECT_EQ(s.sample(l.data(), 4, &lp, &top), 1);
  EXPECT_NEAR(lp, 2 - lse, 1e-6);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].token, 2);
  EXPECT_NEAR(top[0].logprob, 3 - lse, 1e-6);
}

TEST(Sampler, LogprobsWithSamplingMatchTheDrawnToken) {
  SamplingParams p = params(1.0f, 3);
  p.top_logprobs = 3;
  SequenceSampler s(p, {});
  const std::vector<float> raw = base_logits();
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l = raw;
    float lp = 1;
    std::vector<sampling::TokenLogprob> top;
    const int32_t t = s.sample(l.data(), kVocab, &lp, &top);
    // ln p of the hand distribution (softmax of ln p is p).
    const std::map<int, double> lnp = {
        {5, std::log(0.5)}, {2, std::log(0.25)}, {7, std::log(0.15)}, {0, std::log(0.1)}};
    ASSERT_TRUE(lnp.count(t));
    EXPECT_NEAR(lp, lnp.at(t), 1e-5);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].token, 5);
    EXPECT_EQ(top[1].token, 2);
    EXPECT_EQ(top[2].token, 7);
    EXPECT_NEAR(top[2].logprob, std::log(0.15), 1e-5);
  }
}

TEST(Sampler, ChosenRankCountsTheWholeVocabulary) {
  // High temperature over 1000 random logits: most draws fall outside the 2 listed best, and
  // the rank is still 1 + the tokens whose logprob (full log-softmax, in double) is higher.
  constexpr int kV = 1000;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> raw(kV);
  for (float& x : raw) x = normal(gen);
  double mx = *std::max_element(raw.begin(), raw.end()), sum = 0;
  for (float x : raw) sum += std::exp(double(x) - mx);
  const double lse = mx + std::log(sum);

  SamplingParams p = params(5.0f, 99);
  p.top_logprobs = 2;
  SequenceSampler s(p, {});
  int outside = 0;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l = raw;
    float lp = 0;
    int32_t rank = -1;
    std::vector<sampling::TokenLogprob> top;
    const int32_t t = s.sample(l.data(), kV, &lp, &top, &rank);
    const double want_lp = double(raw[size_t(t)]) - lse;
    int above = 0;
    for (int j = 0; j < kV; ++j) above += (double(raw[size_t(j)]) - lse) > want_lp;
    EXPECT_NEAR(lp, want_lp, 1e-4);
    EXPECT_EQ(rank, above + 1) << "draw " << i << " token " << t;
    ASSERT_EQ(top.size(), 2u);
    outside += (t != top[0].token && t != top[1].token);
  }
  EXPECT_GT(outside, 50) << "the draws should mostly fall outside the listed best";

  // Ties count as not higher; -inf (masked) tokens are never higher.
  const float z[] = {1, 3, 3, 2, kNegInf};
  const std::pair<int32_t, int32_t> want[] = {{1, 1}, {2, 1}, {3, 3}, {0, 4}, {4, 5}};
  for (const auto& [chosen, r] : want) {
    int32_t rank = 0;
    sampling::log_softmax_top(z, 5, 0, chosen, nullptr, nullptr, &rank);
    EXPECT_EQ(rank, r) << "token " << chosen;
  }
}

namespace {

void expect_rejected(const SamplingParams& p, const std::string& name) {
  try {
    p.validate();
    ADD_FAILURE() << "accepted bad " << name;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
        << "message does not name " << name << ": " << e.what();
  }
}

}  // namespace

TEST(SamplingParams, ValidateRejectsBadValuesNamingTheParameter) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto with = [](auto f) {
    SamplingParams p;
    f(p);
    return p;
  };
  for (float v : {nan, inf, -inf, -0.1f, 101.0f})
    expect_rejected(with([&](SamplingParams& p) { p.temperature = v; }), "temperature");
  expect_rejected(with([](SamplingParams& p) { p.top_k = -1; }), "top_k");
  for (float v : {nan, 0.0f, -0.5f, 1.01f, inf})
    expect_rejected(with([&](SamplingParams& p) { p.top_p = v; }), "top_p");
  for (float v : {nan, -0.01f, 1.5f, inf})
    expect_rejected(with([&](SamplingParams& p) { p.min_p = v; }), "min_p");
  for (float v : {nan, 0.0f, -1.0f, 10.5f, inf})
    expect_rejected(with([&](SamplingParams& p) { p.repetition_penalty = v; }),
                    "repetition_penalty");
  for (float v : {nan, 2.5f, -2.5f, inf})
    expect_rejected(with([&](SamplingParams& p) { p.presence_penalty = v; }), "presence_penalty");
  for (float v : {nan, 2.5f, -2.5f, -inf})
    expect_rejected(with([&](SamplingParams& p) { p.frequency_penalty = v; }), "frequency_penalty");
  for (int v : {0, -5})
    expect_rejected(with([&](SamplingParams& p) { p.max_tokens = v; }), "max_tokens");
  for (int v : {-2, 21})
    expect_rejected(with([&](SamplingParams& p) { p.top_logprobs = v; }), "top_logprobs");
  expect_rejected(with([](SamplingParams& p) { p.stop = {"ok", ""}; }), "stop");
  expect_rejected(with([](SamplingParams& p) { p.stop.assign(17, "x"); }), "stop");
}

TEST(SamplingParams, ValidateAcceptsBoundaryValues) {
  SamplingParams p;
  EXPECT_NO_THROW(p.validate());
  p.temperature = 0;
  p.top_k = 1;
  p.top_p = 1;
  p.min_p = 1;
  p.repetition_penalty = 10;
  p.presence_penalty = -2;
  p.frequency_penalty = 2;
  p.max_tokens = 1;
  p.top_logprobs = 20;
  p.stop.assign(16, "x");
  EXPECT_NO_THROW(p.validate());
  p.temperature = 100;
  p.top_p = 1e-6f;
  p.min_p = 0;
  p.top_logprobs = -1;
  EXPECT_NO_THROW(p.validate());
}
