// Constrained requests inside the engine: a grammar that no token can continue (the dummy
// tokenizer's tokens spell nothing) ends its request with FinishReason::Error and a message,
// at once and without disturbing an unconstrained neighbour in the same batch; a bad grammar is
// refused at add_request; logit_bias forces a token.
#include <gtest/gtest.h>

#include <map>

#include "common/dummy_engine.h"
#include "common/test_text.h"
#include "core/error.h"
#include "lite_llama/engine.h"

using namespace lite_llama;

namespace {

std::unique_ptr<Engine> dummy_engine(const lite_llama::testing::TempDir& dir, double warm_ms = 2000) {
  EngineOptions o = lite_llama::testing::tiny_dummy_options(dir);
  o.grammar_warm_ms = warm_ms;
  o.max_num_seqs = 4;
  return Engine::create(o);
}

}  // namespace

TEST(GrammarEngine, DeadEndGrammarEndsWithError) {
  lite_llama::testing::TempDir dir;
  auto e = dummy_engine(dir);
  SamplingParams constrained;
  constrained.temperature = 0;
  constrained.max_tokens = 50;
  constrained.grammar = "root ::= \"{\" [a-z]* \"}\"";
  SamplingParams free = constrained;
  free.grammar.clear();
  free.max_tokens = 5;
  const int64_t a = e->add_request({1, 2, 3}, constrained);
  const int64_t b = e->add_request({4, 5, 6}, free);
  std::map<int64_t, RequestOutput> last;
  std::map<int64_t, int> tokens;
  for (int steps = 0; e->has_unfinished() && steps < 100; ++steps)
    for (RequestOutput& o : e->step()) {
      tokens[o.id] += int(o.tokens.size());
      last[o.id] = o;
    }
  ASSERT_FALSE(e->has_unfinished());
  EXPECT_EQ(last[a].finish_reason, FinishReason::Error);
  EXPECT_NE(last[a].error.find("no token can continue"), std::string::npos) << last[a].error;
  EXPECT_EQ(tokens[a], 0);
  EXPECT_EQ(last[b].finish_reason, FinishReason::Length);
  EXPECT_EQ(tokens[b], 5);
}

TEST(GrammarEngine, BadGrammarAndBiasAreChecked) {
  lite_llama::testing::TempDir dir;
  auto e = dummy_engine(dir);
  SamplingParams p;
  p.grammar = "root ::= [";
  EXPECT_THROW(e->add_request({1, 2}, p), Error);
  p.grammar.clear();
  p.logit_bias = {{100000, 1.f}};
  EXPECT_THROW(e->add_request({1, 2}, p), Error);
  p.logit_bias = {{77, 100.f}};
  p.max_tokens = 4;
  p.temperature = 0;
  const int64_t id = e->add_request({1, 2}, p);
  std::vector<int32_t> out;
  while (e->has_unfinished())
    for (const RequestOutput& o : e->step())
      if (o.id == id) out.insert(out.end(), o.tokens.begin(), o.tokens.end());
  EXPECT_EQ(out, std::vector<int32_t>(4, 77));
}

// A new grammar's requests wait outside the scheduler while its mask cache is warmed (on by
// default): with the warm-up on or off, every request ends, a cancelled one included (cancelled
// while it may still be waiting for the warm-up), with the same outcome.
TEST(GrammarEngine, WarmUpHoldsNoRequest) {
  for (double warm_ms : {2000.0, 0.0}) {
    SCOPED_TRACE(warm_ms);
    lite_llama::testing::TempDir dir;
    auto e = dummy_engine(dir, warm_ms);
    SamplingParams constrained;
    constrained.temperature = 0;
    constrained.max_tokens = 20;
    constrained.grammar = "root ::= \"[\" ([a-z]{0,8} \",\"){0,4} \"]\"";
    SamplingParams free = constrained;
    free.grammar.clear();
    free.max_tokens = 3;
    const int64_t a = e->add_request({1, 2, 3}, constrained);
    const int64_t b = e->add_request({4, 5}, constrained);
    const int64_t c = e->add_request({6, 7}, free);
    e->cancel(b);
    std::map<int64_t, RequestOutput> last;
    for (int steps = 0; e->has_unfinished() && steps < 1000; ++steps)
      for (RequestOutput& o : e->step()) last[o.id] = o;
    ASSERT_FALSE(e->has_unfinished());
    EXPECT_EQ(last[a].finish_reason, FinishReason::Error);  // the dummy tokens spell nothing
    EXPECT_EQ(last[b].finish_reason, FinishReason::Cancelled);
    EXPECT_EQ(last[c].finish_reason, FinishReason::Length);
    EXPECT_EQ(e->stats().waiting, 0);
  }
}
