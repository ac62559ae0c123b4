// allowed_token_ids and bad_words inside the engine (dummy weights; the dummy tokenizer maps a
// byte to the token of that id, so a one-byte word is that one token). Golden picks come from
// the logits the engine's scoring reports for the same tokens, without the constraint.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>

#include "common/dummy_engine.h"
#include "core/error.h"
#include "lite_llama/engine.h"

using namespace lite_llama;
using Ids = std::vector<int32_t>;

namespace {

std::unique_ptr<Engine> engine(const lite_llama::testing::TempDir& dir) {
  EngineOptions o = lite_llama::testing::tiny_dummy_options(dir);
  o.max_num_seqs = 4;
  return Engine::create(o);
}

std::map<int64_t, Ids> run_all(Engine& e) {
  std::map<int64_t, Ids> out;
  for (int steps = 0; e.has_unfinished() && steps < 1000; ++steps)
    for (const RequestOutput& o : e.step()) out[o.id].insert(out[o.id].end(), o.tokens.begin(), o.tokens.end());
  return out;
}

Ids generate(Engine& e, const Ids& prompt, const SamplingParams& p) {
  const int64_t id = e.add_request(prompt, p);
  return run_all(e)[id];
}

// The logits row predicting each token of `out` after `prompt`.
std::vector<std::vector<float>> rows(Engine& e, const Ids& prompt, const Ids& out) {
  Ids seq = prompt;
  seq.insert(seq.end(), out.begin(), out.end());
  std::vector<std::vector<float>> r(out.size());
  const int first = int(prompt.size()) - 1;
  e.score({seq}, 0, [&](int, int pos, const float* l, int64_t v) {
    if (pos >= first && pos - first < int(out.size())) r[size_t(pos - first)].assign(l, l + v);
  });
  return r;
}

int32_t best_of(const std::vector<float>& row, const Ids& among) {
  int32_t best = among[0];
  for (int32_t t : among)
    if (row[size_t(t)] > row[size_t(best)] || (row[size_t(t)] == row[size_t(best)] && t < best)) best = t;
  return best;
}

SamplingParams greedy(int n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

}  // namespace

TEST(TokenBans, AllowedTokenIdsPickTheBestAllowed) {
  lite_llama::testing::TempDir dir;
  auto e = engine(dir);
  const Ids prompt = {1, 2, 3};
  const Ids free = generate(*e, prompt, greedy(8));
  Ids allowed;  // tokens the unconstrained output never takes
  for (int32_t t = 40; allowed.size() < 5; t += 37)
    if (std::find(free.begin(), free.end(), t) == free.end()) allowed.push_back(t);
  SamplingParams p = greedy(8);
  p.allowed_token_ids = allowed;
  SamplingParams sampled = p;
  sampled.temperature = 1.0f;
  sampled.seed = 7;
  const int64_t a = e->add_request(prompt, p);
  const int64_t b = e->add_request(prompt, sampled);
  const int64_t c = e->add_request(prompt, greedy(8));  // a free neighbour in the same steps
  auto out = run_all(*e);
  ASSERT_EQ(out[a].size(), 8u);
  ASSERT_EQ(out[b].size(), 8u);
  EXPECT_EQ(out[c], free);
  for (const Ids* o : {&out[a], &out[b]})
    for (int32_t t : *o) EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
  const auto r = rows(*e, prompt, out[a]);
  for (size_t k = 0; k < out[a].size(); ++k) EXPECT_EQ(out[a][k], best_of(r[k], allowed)) << "token " << k;
}

TEST(TokenBans, AllowedTokenIdsChecked) {
  lite_llama::testing::TempDir dir;
  auto e = engine(dir);
  SamplingParams p = greedy(2);
  p.allowed_token_ids = Ids{};
  EXPECT_THROW(e->add_request({1, 2}, p), Error);
  p.allowed_token_ids = Ids{3, 256};  // the vocabulary is 256
  EXPECT_THROW(e->add_request({1, 2}, p), Error);
  EXPECT_FALSE(e->has_unfinished());
}

TEST(TokenBans, BadWordsBanTheirLastToken) {
  lite_llama::testing::TempDir dir;
  auto e = engine(dir);
  const Ids prompt = {1, 2, 3};
  const Ids free = generate(*e, prompt, greedy(8));
  const int32_t t0 = free[0], t1 = free[1];
  ASSERT_FALSE(t0 == ' ' || (t0 >= '\t' && t0 <= '\r')) << "a blank word: pick another prompt";
  // One token: banned everywhere; the first pick is the best of the rest.
  SamplingParams one = greedy(8);
  one.bad_words = {std::string(1, char(t0))};
  const Ids o1 = generate(*e, prompt, one);
  EXPECT_EQ(std::find(o1.begin(), o1.end(), t0), o1.end());
  std::vector<float> row0 = rows(*e, prompt, o1)[0];
  row0[size_t(t0)] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(o1[0], best_of(row0, [] { Ids all(256); for (int i = 0; i < 256; ++i) all[size_t(i)] = i; return all; }()));
  // Two tokens: the second is banned only right after the first.
  SamplingParams two = greedy(8);
  two.bad_words = {std::string{char(t0), char(t1)}};
  const Ids o2 = generate(*e, prompt, two);
  EXPECT_EQ(o2[0], t0);
  EXPECT_NE(o2[1], t1);
  for (size_t k = 1; k < o2.size(); ++k) EXPECT_FALSE(o2[k - 1] == t0 && o2[k] == t1) << k;
}
