// Automatic prefix caching on the CPU with the default model: every workload's tokens with the
// cache equal those of the same workload without it (whose greedy output equals HF transformers,
// test_greedy), token for token, and the cache is actually used (cached_tokens, stats).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/default_model.h"
#include "lite_llama/engine.h"

using namespace lite_llama;

namespace {

struct Job {
  std::vector<int32_t> prompt;
  SamplingParams params;
};
struct Result {
  std::vector<int32_t> tokens;
  int cached = 0;
};

std::unique_ptr<Engine> make_engine(bool cache, int64_t kv_tokens = 0, int budget = 0) {
  EngineOptions o;
  o.model = lite_llama::testing::default_model_path();
  o.backend.device = DeviceKind::Cpu;
  o.backend.threads = 2;
  o.ctx = 1024;
  o.kv_tokens = kv_tokens;
  o.max_batched_tokens = budget;
  o.prefix_cache = cache;
  return Engine::create(o);
}

// Submits every job at once and steps until all are done.
std::vector<Result> run(Engine& e, const std::vector<Job>& jobs) {
  std::map<int64_t, size_t> which;
  for (size_t i = 0; i < jobs.size(); ++i) which[e.add_request(jobs[i].prompt, jobs[i].params)] = i;
  std::vector<Result> out(jobs.size());
  while (e.has_unfinished())
    for (const RequestOutput& r : e.step()) {
      Result& res = out[which.at(r.id)];
      res.tokens.insert(res.tokens.end(), r.tokens.begin(), r.tokens.end());
      if (r.finished) res.cached = r.cached_tokens;
    }
  return out;
}

SamplingParams greedy(int n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

std::string system_prompt() {
  std::string s = "You are a careful assistant for a library. ";
  for (int i = 0; i < 6; ++i)
    s += "Answer questions about opening hours, loans, renewals, fines and events politely and briefly. ";
  return s;
}

class PrefixCache : public ::testing::Test {
 protected:
  void SetUp() override { LL_REQUIRE_DEFAULT_MODEL(); }
  void expect_same(const std::vector<Result>& with, const std::vector<Result>& without) {
    ASSERT_EQ(with.size(), without.size());
    for (size_t i = 0; i < with.size(); ++i) EXPECT_EQ(with[i].tokens, without[i].tokens) << "request " << i;
  }
};

TEST_F(PrefixCache, SharedSystemPromptAcross32ConcurrentRequests) {
  auto cached = make_engine(true), plain = make_engine(false);
  const std::string sys = system_prompt();
  std::vector<Job> jobs;
  for (int i = 0; i < 32; ++i)
    jobs.push_back({cached->tokenize(sys + "Question " + std::to_string(i) + ": when do you open?", true, false),
                    greedy(8)});
  // A first request warms the cache, then 32 arrive together (some admitted before the first of
  // them has finished its prefill, the rest after).
  run(*cached, {jobs[0]});
  run(*plain, {jobs[0]});
  const auto with = run(*cached, jobs), without = run(*plain, jobs);
  expect_same(with, without);
  const int64_t sys_tokens = int64_t(cached->tokenize(sys, true, false).size());
  for (const Result& r : with) EXPECT_GE(r.cached, sys_tokens - 1);
  for (const Result& r : without) EXPECT_EQ(r.cached, 0);
  const EngineStats s = cached->stats();
  EXPECT_GT(s.prefix_hit_tokens, 31 * (sys_tokens - 1));
  EXPECT_GT(s.prefix_cached_tokens, 0);
  EXPECT_EQ(plain->stats().prefix_hit_tokens, 0);
}

TEST_F(PrefixCache, MultiTurnChatReusesEachTurn) {
  auto cached = make_engine(true), plain = make_engine(false);
  std::vector<ChatMessage> msgs = {{"system", system_prompt()}};
  const char* turns[] = {"Hello!", "When do you open on Sundays?", "And can I renew a loan online?",
                         "Thanks. Any events this week?"};
  int prev_len = 0;
  for (const char* t : turns) {
    msgs.push_back({"user", t});
    const std::vector<int32_t> prompt = cached->tokenize(cached->apply_chat_template(msgs, true, ""), false, true);
    const auto with = run(*cached, {{prompt, greedy(12)}}), without = run(*plain, {{prompt, greedy(12)}});
    expect_same(with, without);
    // Each turn finds the previous turn's prompt (and its answer's computed tokens) cached.
    EXPECT_GE(with[0].cached, prev_len > 0 ? prev_len - 1 : 0) << t;
    prev_len = int(prompt.size());
    msgs.push_back({"assistant", cached->detokenize(with[0].tokens)});
  }
}

TEST_F(PrefixCache, EvictionUnderASmallPoolMatches) {
  // A pool three requests wide, a 64-token step budget (chunked prefill), 12 requests over three
  // shared prefixes: the cache evicts, sequences are preempted and resumed.
  auto cached = make_engine(true, 3 * 190, 64), plain = make_engine(false, 3 * 190, 64);
  std::vector<Job> jobs;
  for (int i = 0; i < 12; ++i) {
    const std::string head = "Topic " + std::to_string(i % 3) + ". " + system_prompt().substr(0, size_t(200 + 60 * (i % 3)));
    jobs.push_back({cached->tokenize(head + " Item " + std::to_string(i), true, false), greedy(24)});
  }
  const auto with = run(*cached, jobs), without = run(*plain, jobs);
  expect_same(with, without);
  EXPECT_GT(cached->stats().prefix_hit_tokens, 0);
  EXPECT_EQ(cached->stats().running, 0);
}

TEST_F(PrefixCache, CancelledMidPrefillPrefixIsReused) {
  auto cached = make_engine(true, 0, 32), plain = make_engine(false, 0, 32);
  const std::vector<int32_t> prompt = cached->tokenize(system_prompt() + "Tell me about fines.", true, false);
  ASSERT_GT(prompt.size(), 100u);
  const int64_t id = cached->add_request(prompt, greedy(8));
  for (int i = 0; i < 2; ++i) cached->step();  // two 32-token chunks of its prefill
  cached->cancel(id);
  bool saw_cancel = false;
  while (cached->has_unfinished())
    for (const RequestOutput& r : cached->step()) saw_cancel |= r.finished && r.finish_reason == FinishReason::Cancelled;
  EXPECT_TRUE(saw_cancel);
  const auto with = run(*cached, {{prompt, greedy(16)}}), without = run(*plain, {{prompt, greedy(16)}});
  expect_same(with, without);
  EXPECT_GE(with[0].cached, 64);  // the two computed chunks of the cancelled request
}

TEST_F(PrefixCache, SampledSeedsShareOnePrefix) {
  auto cached = make_engine(true), plain = make_engine(false);
  const std::vector<int32_t> prompt = cached->tokenize(system_prompt() + "Write a short greeting.", true, false);
  std::vector<Job> jobs;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SamplingParams p;
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    p.seed = seed;
    p.max_tokens = 16;
    p.ignore_eos = true;
    jobs.push_back({prompt, p});
  }
  run(*cached, {jobs[0]});  // the prompt cached before the four arrive
  run(*plain, {jobs[0]});
  const auto with = run(*cached, jobs), without = run(*plain, jobs);
  expect_same(with, without);
  for (const Result& r : with) EXPECT_EQ(r.cached, int(prompt.size()) - 1);
  EXPECT_NE(with[0].tokens, with[1].tokens);  // the seeds did sample differently
}

}  // namespace
