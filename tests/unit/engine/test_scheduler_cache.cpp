// Scheduler with automatic prefix caching, on the fake model of scheduler_sim.h (which checks
// that every cached slot holds the K/V of its prefix, that the request table is written from
// table_start, and that refcounts are running holders + the cache's one).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "kv/kv_pool.h"
#include "kv/radix_cache.h"
#include "scheduler_sim.h"

using namespace lite_llama;
using lite_llama::test::Sim;
using lite_llama::test::arrivals_this_step;
using lite_llama::test::cancel_some;
using lite_llama::test::expect_drained;
using lite_llama::test::random_shape;
using Tokens = std::vector<int32_t>;

namespace {

Tokens range(int32_t from, int32_t n) {
  Tokens t;
  for (int32_t i = 0; i < n; ++i) t.push_back(from + i);
  return t;
}

Tokens cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST(SchedulerCache, LaterRequestsStartFromTheSharedPrefix) {
  SchedulerConfig cfg{4, 64, 64};
  Sim sim(cfg, 64, 4, true);
  const Tokens p = range(1, 10);
  Sequence* a = sim.add(cat(p, {11}), 1);
  sim.step();
  ASSERT_EQ(a->state, Sequence::State::Finished);
  EXPECT_EQ(a->num_cached, 0);
  EXPECT_EQ(sim.cache()->cached_tokens(), 11) << "the computed tokens stay cached";
  EXPECT_EQ(sim.pool().num_used(), 11);

  Sequence* b = sim.add(cat(p, {20, 21}), 2);
  StepPlan plan = sim.step();
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].num_tokens, 2) << "only the tokens after the shared prefix";
  EXPECT_EQ(plan.items[0].table_start, 0) << "the cached slots go into the table too";
  EXPECT_TRUE(plan.items[0].sample);
  EXPECT_EQ(b->num_cached, 10);
  EXPECT_EQ(sim.pool().num_used(), 13);

  // The same prompt again: everything but its last token comes from the cache.
  Sequence* c = sim.add(cat(p, {11}), 1);
  plan = sim.step();
  ASSERT_EQ(plan.items.size(), 2u);
  const ScheduledSeq& ci = plan.items[0].seq == c ? plan.items[0] : plan.items[1];
  EXPECT_EQ(ci.num_tokens, 1);
  EXPECT_EQ(ci.table_start, 0);
  EXPECT_EQ(c->num_cached, 10);
  const kv::RadixStats& st = sim.cache()->stats();
  EXPECT_EQ(st.queried_tokens, 11 + 12 + 11);
  EXPECT_EQ(st.hit_tokens, 10 + 10);
  while (!sim.all_done()) sim.step();
  EXPECT_EQ(sim.pool().num_used(), sim.cache()->cached_tokens());
  const int32_t cached = sim.cache()->cached_tokens();
  EXPECT_EQ(sim.cache()->evict(INT32_MAX), cached);
  EXPECT_EQ(sim.pool().num_free(), 64);
}

TEST(SchedulerCache, ARunningSequencesPromptIsSharedWhileItDecodes) {
  SchedulerConfig cfg{4, 64, 64};
  Sim sim(cfg, 64, 4, true);
  const Tokens p = range(1, 10);
  Sequence* a = sim.add(cat(p, {11}), 20);
  sim.step();  // A's prefill: its prompt is cached at once
  Sequence* b = sim.add(cat(p, {30}), 5);
  StepPlan plan = sim.step();
  ASSERT_EQ(plan.items.size(), 2u);
  EXPECT_EQ(b->num_cached, 10);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(a->slots[size_t(i)], b->slots[size_t(i)]);
    EXPECT_EQ(sim.pool().refcount(a->slots[size_t(i)]), 3) << "cache + A + B";
  }
  EXPECT_NE(a->slots[10], b->slots[10]);
}

TEST(SchedulerCache, EvictsTheCacheBeforePreempting) {
  // Pool 16: A leaves 6 cached tokens; B and C then need 8 slots each, the whole pool.
  SchedulerConfig cfg{4, 64, 12};
  Sim sim(cfg, 16, 4, true);
  sim.add(range(100, 6), 1);
  sim.step();
  EXPECT_EQ(sim.cache()->cached_tokens(), 6);
  Sequence* b = sim.add(range(200, 3), 6);
  Sequence* c = sim.add(range(300, 3), 6);
  int guard = 0;
  while (!sim.all_done() && guard++ < 20) sim.step();
  EXPECT_EQ(b->state, Sequence::State::Finished);
  EXPECT_EQ(c->state, Sequence::State::Finished);
  EXPECT_EQ(sim.sched().num_preemptions(), 0);
  EXPECT_EQ(sim.cache()->stats().evicted_tokens, 6);
  EXPECT_EQ(sim.cache()->cached_tokens(), 16);
}

TEST(SchedulerCache, AdmissionEvictsOnlyWhenThatAdmits) {
  SchedulerConfig cfg{4, 64, 12};
  Sim sim(cfg, 12, 4, true);
  sim.add(range(100, 4), 1);
  sim.step();
  Sequence* r = sim.add(range(200, 6), 20);
  sim.step();
  ASSERT_EQ(sim.cache()->cached_tokens(), 4 + 6);
  ASSERT_EQ(sim.pool().num_free(), 2);
  // W needs 11 slots: 1 free after R's decode plus 4 evictable is not enough. It waits, and the
  // cache keeps its tokens.
  Sequence* w = sim.add(range(300, 11), 1);
  sim.step();
  EXPECT_EQ(w->state, Sequence::State::Waiting);
  EXPECT_EQ(sim.pool().num_free(), 1);
  EXPECT_EQ(sim.cache()->stats().evicted_tokens, 0);
  // Without R everything is evictable: W evicts what it needs and runs.
  sim.cancel(r);
  sim.step();
  EXPECT_EQ(w->state, Sequence::State::Finished);
  EXPECT_EQ(sim.sched().num_preemptions(), 0);
  EXPECT_EQ(sim.cache()->stats().evicted_tokens, 10) << "11 needed, 1 free";
  EXPECT_EQ(sim.pool().num_used(), sim.cache()->cached_tokens());
}

TEST(SchedulerCache, PreemptedSequenceResumesFromItsCachedTokens) {
  // Pool 14, context 12: A (4 + 8) and B (4 + 7) fill the pool; B is preempted, its computed
  // tokens go to the cache, A's growth evicts B's newest ones, B resumes from what is left.
  SchedulerConfig cfg{4, 64, 12};
  Sim sim(cfg, 14, 4, true);
  Sequence* a = sim.add(4, 8);
  Sequence* b = sim.add(4, 7);
  for (int i = 0; i < 4; ++i) sim.step();
  ASSERT_EQ(sim.pool().num_free(), 0);
  ASSERT_EQ(b->num_tokens(), 8);
  StepPlan p = sim.step();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b);
  EXPECT_EQ(b->num_preemptions, 1);
  EXPECT_EQ(sim.cache()->cached_tokens(), 4 + 6) << "A's prompt + B's 7 computed minus one evicted";
  while (a->state != Sequence::State::Finished) sim.step();
  p = sim.step();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].seq, b);
  EXPECT_EQ(p.items[0].table_start, 0);
  EXPECT_EQ(p.items[0].num_tokens, 5) << "3 of B's tokens were still cached";
  EXPECT_EQ(b->num_cached, 0) << "usage counts only the first admission's cache hits";
  while (b->state != Sequence::State::Finished) sim.step();
  EXPECT_EQ(sim.sched().num_preemptions(), 1);
}

TEST(SchedulerCache, CancellationCachesOnlyComputedTokens) {
  SchedulerConfig cfg{4, 8, 128};
  Sim sim(cfg, 100, 4, true);
  const Tokens prompt = range(1, 30);
  Sequence* s = sim.add(prompt, 2);
  sim.step();
  sim.step();
  ASSERT_EQ(s->num_computed, 16);
  Sequence* waiting = sim.add(range(500, 5), 1);
  sim.cancel(waiting);
  sim.cancel(s);
  EXPECT_EQ(sim.cache()->cached_tokens(), 16) << "not the 14 slots reserved for the rest";
  EXPECT_EQ(sim.pool().num_used(), 16);
  Sequence* t = sim.add(prompt, 1);
  StepPlan p = sim.step();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(t->num_cached, 16);
  EXPECT_EQ(p.items[0].num_tokens, 8);
  EXPECT_EQ(p.items[0].table_start, 0);
  p = sim.step();
  EXPECT_EQ(p.items[0].table_start, 24);
  while (!sim.all_done()) sim.step();
}

// Random workloads with shared prompt heads: every invariant of the simulator after every step;
// all requests finish; afterwards the pool holds only the cache, which evicts down to nothing.
TEST(SchedulerCache, RandomWorkloadsKeepInvariantsAndFinish) {
  int64_t total_preemptions = 0, total_cancels = 0, total_hits = 0, total_evicted = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uni = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    const auto [cfg, pool, rows] = random_shape(uni);
    Sim sim(cfg, pool, rows, true);
    std::vector<Tokens> heads(size_t(uni(1, 4)));
    for (Tokens& h : heads)
      for (int i = uni(1, cfg.max_ctx - 1); i > 0; --i) h.push_back(uni(1, 3));
    const int num_requests = uni(5, 40);
    const int arrival_mode = uni(0, 2);
    const double cancel_p = uni(0, 1) ? 0.05 : 0.0;
    int added = 0;
    const int max_steps = 20000;
    while ((added < num_requests || !sim.all_done()) && sim.steps() < max_steps) {
      const int arrivals = arrivals_this_step(arrival_mode, added, num_requests, uni);
      for (int i = 0; i < arrivals && added < num_requests; ++i, ++added) {
        const int len = uni(1, std::min(cfg.max_ctx - 1, int(pool) - 1));
        const Tokens& h = heads[size_t(uni(0, int(heads.size()) - 1))];
        Tokens prompt(h.begin(), h.begin() + std::min<long>(long(h.size()), uni(0, len)));
        while (int(prompt.size()) < len) prompt.push_back(uni(1, 3));
        sim.add(prompt, uni(1, 30));
      }
      total_cancels += cancel_some(sim, cancel_p, rng, uni);
      sim.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_TRUE(sim.all_done()) << "livelock: requests left after " << max_steps << " steps";
    expect_drained(sim, sim.cache()->cached_tokens(), rows);
    EXPECT_TRUE(sim.sched().schedule().empty());
    total_hits += sim.cache()->stats().hit_tokens;
    total_evicted += sim.cache()->stats().evicted_tokens;
    EXPECT_EQ(sim.cache()->evict(INT32_MAX), sim.cache()->stats().inserted_tokens -
                                                 sim.cache()->stats().evicted_tokens);
    EXPECT_EQ(sim.pool().num_free(), pool);
    total_preemptions += sim.sched().num_preemptions();
  }
  RecordProperty("preemptions", std::to_string(total_preemptions));
  RecordProperty("hit_tokens", std::to_string(total_hits));
  RecordProperty("evicted_tokens", std::to_string(total_evicted));
  EXPECT_GT(total_preemptions, 50);
  EXPECT_GT(total_cancels, 50);
  EXPECT_GT(total_hits, 10000);
  EXPECT_GT(total_evicted, 10000);
}
