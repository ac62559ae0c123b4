// SamplingParams::prompt_logprobs: the prompt is scored between steps on the stepping thread, on
// a request row and KV slots no running request holds. Here every row is taken by running
// requests when it arrives: it waits for a free row, its prompt logprobs equal an idle engine's
// score(), and the running requests' outputs are those of a run without it.
#include <gtest/gtest.h>

#include <map>

#include "common/dummy_engine.h"
#include "common/test_text.h"
#include "core/error.h"
#include "lite_llama/engine.h"

using namespace lite_llama;

namespace {

std::unique_ptr<Engine> dummy_engine(const lite_llama::testing::TempDir& dir) {
  EngineOptions o = lite_llama::testing::tiny_dummy_options(dir);
  o.max_num_seqs = 2;
  return Engine::create(o);
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Every request's tokens and its first output's prompt logprobs, stepping until idle.
struct Outputs {
  std::map<int64_t, std::vector<int32_t>> tokens;
  std::map<int64_t, std::vector<TokenLogprobs>> prompt;
};
void step_all(Engine& e, Outputs& run) {
  for (int steps = 0; e.has_unfinished() && steps < 200; ++steps)
    for (RequestOutput& o : e.step()) {
      auto& t = run.tokens[o.id];
      if (t.empty() && !o.tokens.empty()) run.prompt[o.id] = o.prompt_logprobs;
      else EXPECT_TRUE(o.prompt_logprobs.empty()) << "only the first output carries them";
      t.insert(t.end(), o.tokens.begin(), o.tokens.end());
    }
  ASSERT_FALSE(e.has_unfinished());
}

}  // namespace

TEST(PromptLogprobs, ScoredBetweenStepsWhileEveryRowRuns) {
  lite_llama::testing::TempDir dir;
  auto e = dummy_engine(dir);
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {9, 8, 7}, p = {5, 17, 33, 2, 60, 11, 40};

  Outputs alone;  // the two running requests without the scoring one
  const int64_t a0 = e->add_request(a, greedy(12)), b0 = e->add_request(b, greedy(12));
  step_all(*e, alone);

  Outputs mixed;
  const int64_t a1 = e->add_request(a, greedy(12)), b1 = e->add_request(b, greedy(12));
  for (int i = 0; i < 3; ++i)
    for (RequestOutput& o : e->step()) mixed.tokens[o.id].insert(mixed.tokens[o.id].end(), o.tokens.begin(), o.tokens.end());
  SamplingParams sp = greedy(3);
  sp.prompt_logprobs = 4;
  const int64_t c = e->add_request(p, sp);
  for (RequestOutput& o : e->step()) mixed.tokens[o.id].insert(mixed.tokens[o.id].end(), o.tokens.begin(), o.tokens.end());
  EXPECT_EQ(e->stats().waiting, 1);  // both rows are taken: it still waits to be scored
  EXPECT_EQ(e->stats().running, 2);
  step_all(*e, mixed);
  EXPECT_EQ(mixed.tokens[a1], alone.tokens[a0]);
  EXPECT_EQ(mixed.tokens[b1], alone.tokens[b0]);
  EXPECT_EQ(mixed.tokens[c].size(), 3u);

  const std::vector<TokenLogprobs>& got = mixed.prompt[c];
  const ScoreResult ref = e->score({p}, 0, {}, 4)[0];
  ASSERT_EQ(got.size(), p.size() - 1);
  ASSERT_EQ(ref.tokens.size(), p.size() - 1);
  for (size_t i = 0; i < got.size(); ++i) {
    const TokenLogprobs& g = got[i];
    EXPECT_EQ(g.token, p[i + 1]);
    EXPECT_NEAR(g.logprob, ref.logprobs[i], 1e-4) << i;
    EXPECT_EQ(g.rank, ref.tokens[i].rank) << i;
    ASSERT_EQ(g.top.size(), 4u);
    EXPECT_EQ(g.top[0].first, ref.argmax[i]) << i;
    for (size_t j = 0; j < g.top.size(); ++j) {
      EXPECT_EQ(g.top[j].first, ref.tokens[i].top[j].first) << i;
      if (j > 0) EXPECT_GE(g.top[j - 1].second, g.top[j].second) << i;
      if (g.top[j].first == g.token) EXPECT_EQ(g.rank, int(j) + 1) << i;
    }
    EXPECT_EQ(g.rank == 1, g.token == ref.argmax[i]) << i;
    if (g.rank > 4) EXPECT_LE(g.logprob, g.top.back().second) << i;
  }
  EXPECT_EQ(e->stats().kv_slots_used, 0);
}

// The scored prompt's K/V go to the prefix cache before its admission (without the cache, to the
// request itself), so its generation does not compute the prompt again: with 4 tokens a step, the first token comes in the first step (the
// prompt's 12 took 3 before), the output equals a run without prompt logprobs, and the usage and
// the cache's statistics count no hit that the engine made itself.
// Without the prefix cache the request takes the scored K/V itself, with the same result.
class ScoredPrompt : public ::testing::TestWithParam<bool> {};

TEST_P(ScoredPrompt, IsNotComputedAgain) {
  const std::vector<int32_t> p = {5, 17, 33, 2, 60, 11, 40, 3, 90, 14, 7, 21};
  auto dummy_engine = [](const lite_llama::testing::TempDir& dir) {
    EngineOptions o = lite_llama::testing::tiny_dummy_options(dir);
    o.max_num_seqs = 2;
    o.max_batched_tokens = 4;
    o.prefix_cache = GetParam();
    return Engine::create(o);
  };
  lite_llama::testing::TempDir dir;
  auto plain = dummy_engine(dir);
  Outputs want;
  const int64_t w = plain->add_request(p, greedy(6));
  step_all(*plain, want);

  lite_llama::testing::TempDir dir2;
  auto e = dummy_engine(dir2);
  SamplingParams sp = greedy(6);
  sp.prompt_logprobs = 2;
  const int64_t id = e->add_request(p, sp);
  std::vector<int32_t> got;
  int cached = -1;
  auto take = [&](std::vector<RequestOutput> outs) {
    for (RequestOutput& o : outs) {
      got.insert(got.end(), o.tokens.begin(), o.tokens.end());
      if (o.finished) cached = o.cached_tokens;
    }
  };
  take(e->step());
  ASSERT_TRUE(e->has_unfinished());
  EXPECT_EQ(got.size(), 1u) << "the first token in the first step: the prompt was not computed again";
  for (int steps = 0; e->has_unfinished() && steps < 50; ++steps) take(e->step());
  EXPECT_EQ(got, want.tokens[w]) << "request " << id;
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(e->stats().prefix_hit_tokens, 0);
  EXPECT_EQ(e->stats().kv_slots_used, 0) << "every slot given back";
}

INSTANTIATE_TEST_SUITE_P(PromptLogprobs, ScoredPrompt, ::testing::Values(true, false),
                         [](const auto& i) { return i.param ? "PrefixCache" : "NoPrefixCache"; });

TEST(PromptLogprobs, OutOfRangeIsRefused) {
  SamplingParams p;
  p.prompt_logprobs = 21;
  EXPECT_THROW(p.validate(), Error);
  p.prompt_logprobs = 20;
  EXPECT_NO_THROW(p.validate());
}
