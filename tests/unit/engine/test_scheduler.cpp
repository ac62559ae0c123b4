// Scheduler without a prefix cache, on the fake model of scheduler_sim.h: random runs vary
// arrivals, pool sizes (small enough to force preemption), budgets and cancellations; targeted
// cases cover chunked prefill, preemption, cancellation and admission limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "engine/scheduler.h"
#include "kv/kv_pool.h"
#include "scheduler_sim.h"

using namespace lite_llama;
using lite_llama::test::Sim;
using lite_llama::test::arrivals_this_step;
using lite_llama::test::cancel_some;
using lite_llama::test::expect_drained;
using lite_llama::test::random_shape;

TEST(Scheduler, RandomWorkloadsKeepInvariantsAndFinish) {
  int64_t total_preemptions = 0, total_cancels = 0, runs[3] = {0, 0, 0};
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uni = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    const auto [cfg, pool, rows] = random_shape(uni);
    Sim sim(cfg, pool, rows);
    const int num_requests = uni(5, 40);
    const int arrival_mode = uni(0, 2);  // 0: all at once, 1: trickle, 2: bursts
    const double cancel_p = uni(0, 1) ? 0.05 : 0.0;
    int added = 0;
    const int max_steps = 20000;
    while ((added < num_requests || !sim.all_done()) && sim.steps() < max_steps) {
      const int arrivals = arrivals_this_step(arrival_mode, added, num_requests, uni);
      for (int i = 0; i < arrivals && added < num_requests; ++i, ++added) {
        // The engine admits prompts shorter than both the context and the pool.
        const int prompt = uni(1, std::min(cfg.max_ctx - 1, int(pool) - 1));
        sim.add(prompt, uni(1, 30));
      }
      total_cancels += cancel_some(sim, cancel_p, rng, uni);
      sim.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_TRUE(sim.all_done()) << "livelock: requests left after " << max_steps << " steps";
    expect_drained(sim, 0, rows);
    EXPECT_TRUE(sim.sched().schedule().empty());
    total_preemptions += sim.sched().num_preemptions();
    runs[0] += sim.full_runs_, runs[1] += sim.partial_runs_, runs[2] += sim.short_runs_;
  }
  // The workloads must actually exercise preemption and cancellation, and sequences whose KV
  // slots are one run, begin with one, or do not (Sequence::leading_run, checked every step).
  EXPECT_GT(total_preemptions, 100);
  EXPECT_GT(total_cancels, 50);
  for (int64_t n : runs) EXPECT_GT(n, 1000);
}

TEST(Scheduler, PromptNeedingTheWholePool) {
  // Pool 16. A (4 tokens) runs; B needs all 16 slots and must wait; C (2 tokens) arrives after
  // B and must wait behind it (FCFS) although its slots would fit.
  SchedulerConfig cfg{4, 64, 32};
  Sim sim(cfg, 16, 4);
  Sequence* a = sim.add(4, 1);
  sim.step();  // A: prefill + its only token -> finished
  EXPECT_EQ(a->state, Sequence::State::Finished);
  Sequence* a2 = sim.add(4, 3);
  sim.step();
  ASSERT_EQ(a2->state, Sequence::State::Running);
  Sequence* b = sim.add(16, 1);
  Sequence* c = sim.add(2, 1);
  StepPlan p = sim.step();
  EXPECT_EQ(b->state, Sequence::State::Waiting);
  EXPECT_EQ(c->state, Sequence::State::Waiting) << "C overtook B";
  while (a2->state != Sequence::State::Finished) sim.step();
  p = sim.step();  // B gets the whole pool
  ASSERT_EQ(b->state, Sequence::State::Finished) << "B should have run its prompt and finished";
  EXPECT_EQ(c->state, Sequence::State::Waiting);
  p = sim.step();
  EXPECT_EQ(c->state, Sequence::State::Finished);
  EXPECT_EQ(sim.pool().num_used(), 0);
}

TEST(Scheduler, WholePoolPromptPlanIsOneChunkUsingEverySlot) {
  SchedulerConfig cfg{2, 64, 32};
  kv::KvPool pool(16);
  kv::ReqRows rows(2);
  Scheduler s(cfg, pool, rows);
  Sequence b;
  for (int i = 0; i < 16; ++i) b.tokens.push_back(i);
  b.num_prompt = 16;
  s.add(&b);
  StepPlan p = s.schedule();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].num_tokens, 16);
  EXPECT_TRUE(p.items[0].sample);
  EXPECT_EQ(pool.num_free(), 0);
  std::set<int32_t> slots(b.slots.begin(), b.slots.end());
  EXPECT_EQ(slots.size(), 16u);
  s.commit(p);
  s.finish(&b);
  EXPECT_EQ(pool.num_free(), 16);
}

TEST(Scheduler, SequenceGrowingToExactlyThePoolSizeCompletes) {
  // max_ctx == pool: a sequence may hold every slot at its last step.
  SchedulerConfig cfg{2, 8, 12};
  Sim sim(cfg, 12, 2);
  Sequence* s = sim.add(10, 100);
  for (int i = 0; i < 10 && s->state != Sequence::State::Finished; ++i) sim.step();
  EXPECT_EQ(s->state, Sequence::State::Finished);
  EXPECT_EQ(s->num_tokens(), 12);
  EXPECT_EQ(sim.sched().num_preemptions(), 0);
}

TEST(Scheduler, PreemptsNewestAndRecomputesIt) {
  // Pool 12 (= max_ctx), two 4-token prompts: after prefill (8 slots) each decode step takes
  // 2 slots.
  SchedulerConfig cfg{4, 64, 12};
  Sim sim(cfg, 12, 4);
  Sequence* a = sim.add(4, 8);
  Sequence* b = sim.add(4, 7);
  sim.step();  // prefill both: 5 tokens each, 8 slots used
  sim.step();  // decode both: 6 tokens, 10 slots
  sim.step();  // 7 tokens, 12 slots
  ASSERT_EQ(sim.pool().num_free(), 0);
  const std::vector<int32_t> b_tokens = b->tokens;
  StepPlan p = sim.step();  // A needs a slot: B (newest) goes
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b);
  EXPECT_EQ(b->state, Sequence::State::Waiting);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->slots.empty());
  EXPECT_EQ(b->tokens, b_tokens);
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].seq, a);
  EXPECT_EQ(sim.sched().num_preemptions(), 1);
  // A runs to its end (12 tokens) alone; then B is recomputed: all 7 tokens in one chunk
  // whose last token is sampled.
  int guard = 0;
  while (a->state != Sequence::State::Finished && guard++ < 20) {
    p = sim.step();
    EXPECT_EQ(b->state, Sequence::State::Waiting);
  }
  ASSERT_EQ(a->state, Sequence::State::Finished);
  EXPECT_EQ(a->num_tokens(), 12);
  p = sim.step();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].seq, b);
  EXPECT_EQ(p.items[0].num_tokens, 7);
  EXPECT_TRUE(p.items[0].sample);
  EXPECT_EQ(std::vector<int32_t>(b->tokens.begin(), b->tokens.begin() + 7), b_tokens);
  EXPECT_EQ(b->num_tokens(), 8);
  while (b->state != Sequence::State::Finished && guard++ < 60) sim.step();
  EXPECT_EQ(b->state, Sequence::State::Finished);
  EXPECT_EQ(sim.pool().num_used(), 0);
}

TEST(Scheduler, ChunkedPrefillSamplesOnlyOnLastChunk) {
  SchedulerConfig cfg{4, 8, 128};
  Sim sim(cfg, 100, 4);
  Sequence* s = sim.add(30, 2);
  const int expect[] = {8, 8, 8, 6};
  for (int i = 0; i < 4; ++i) {
    StepPlan p = sim.step();
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(p.items[0].num_tokens, expect[i]) << "chunk " << i;
    EXPECT_EQ(p.items[0].sample, i == 3) << "chunk " << i;
    if (i == 0) {
      EXPECT_EQ(sim.pool().num_used(), 30) << "slots for the whole prompt at admission";
    }
  }
  EXPECT_EQ(s->num_tokens(), 31);
  StepPlan p = sim.step();  // decode
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].num_tokens, 1);
  EXPECT_TRUE(p.items[0].sample);
  EXPECT_EQ(s->state, Sequence::State::Finished);
}

TEST(Scheduler, ChunkedPrefillSharesTheBudgetWithDecodes) {
  // D decodes every step (1 token); the long prompt gets the other 7 of the 8-token budget.
  SchedulerConfig cfg{4, 8, 128};
  Sim sim(cfg, 100, 4);
  Sequence* d = sim.add(3, 50);
  sim.step();
  Sequence* s = sim.add(20, 1);
  const int expect[] = {7, 7, 6};
  for (int i = 0; i < 3; ++i) {
    StepPlan p = sim.step();
    ASSERT_EQ(p.items.size(), 2u);
    EXPECT_EQ(p.items[0].seq, d);  // decodes first
    EXPECT_EQ(p.items[0].num_tokens, 1);
    EXPECT_EQ(p.items[1].seq, s);
    EXPECT_EQ(p.items[1].num_tokens, expect[i]) << "chunk " << i;
    EXPECT_EQ(p.items[1].sample, i == 2);
  }
  EXPECT_EQ(s->state, Sequence::State::Finished);
}

TEST(Scheduler, PromptChunksBesideDecodesAreCapped) {
  // Budget 8, at most 3 prompt tokens in a step that decodes. A lone 20-token prompt takes
  // chunks of 8; once D decodes, the next prompt takes chunks of 3, and 8 again after D ends.
  SchedulerConfig cfg{4, 8, 128};
  cfg.max_prefill_with_decodes = 3;
  Sim sim(cfg, 200, 4);
  Sequence* a = sim.add(20, 1);
  for (int expect : {8, 8, 4}) {
    StepPlan p = sim.step();
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(p.items[0].num_tokens, expect);
  }
  EXPECT_EQ(a->state, Sequence::State::Finished);
  Sequence* d = sim.add(2, 6);
  sim.step();  // d's prompt
  Sequence* s = sim.add(20, 1);
  for (int expect : {3, 3, 3, 3, 3}) {  // d decodes its 5 other tokens beside them
    StepPlan p = sim.step();
    ASSERT_EQ(p.items.size(), 2u);
    EXPECT_EQ(p.items[0].seq, d);
    EXPECT_EQ(p.items[1].seq, s);
    EXPECT_EQ(p.items[1].num_tokens, expect);
  }
  EXPECT_EQ(d->state, Sequence::State::Finished);
  StepPlan p = sim.step();  // nobody decodes: the rest of the prompt in one chunk
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].num_tokens, 5);
  EXPECT_TRUE(p.items[0].sample);
  EXPECT_THROW(Scheduler(SchedulerConfig{1, 8, 8, -1}, sim.pool(), sim.rows()), std::runtime_error);
}

TEST(Scheduler, LastPrefillChunkOfOneTokenUsesItsReservedSlot) {
  // A 9-token prompt with an 8-token budget leaves exactly one prompt token for the second
  // step. Its slot was reserved at admission: the step must not take another one.
  SchedulerConfig cfg{4, 8, 64};
  Sim sim(cfg, 40, 4);
  Sequence* s = sim.add(9, 3);
  StepPlan p = sim.step();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].num_tokens, 8);
  EXPECT_FALSE(p.items[0].sample);
  EXPECT_EQ(sim.pool().num_used(), 9);
  p = sim.step();
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].num_tokens, 1);
  EXPECT_TRUE(p.items[0].sample);
  EXPECT_EQ(s->num_tokens(), 10);
  EXPECT_EQ(int(s->slots.size()), 9) << "one slot per computed token";
  EXPECT_EQ(sim.pool().num_used(), 9);
}

TEST(Scheduler, CancelWaitingAndRunning) {
  SchedulerConfig cfg{1, 64, 64};
  Sim sim(cfg, 64, 1);
  Sequence* a = sim.add(5, 10);
  Sequence* b = sim.add(5, 10);
  sim.step();
  ASSERT_EQ(a->state, Sequence::State::Running);
  ASSERT_EQ(b->state, Sequence::State::Waiting);  // max_num_seqs 1
  sim.cancel(b);
  EXPECT_EQ(sim.sched().num_waiting(), 0);
  sim.cancel(a);
  EXPECT_EQ(sim.pool().num_used(), 0);
  EXPECT_EQ(sim.rows().num_free(), 1);
  EXPECT_TRUE(sim.sched().schedule().empty());
}

TEST(Scheduler, RequestRowsLimitAdmission) {
  // Two rows for four sequences: only two run at a time.
  SchedulerConfig cfg{8, 64, 64};
  Sim sim(cfg, 64, 2);
  for (int i = 0; i < 4; ++i) sim.add(3, 5);
  StepPlan p = sim.step();
  EXPECT_EQ(sim.sched().num_running(), 2);
  EXPECT_EQ(sim.sched().num_waiting(), 2);
  int guard = 0;
  while (!sim.all_done() && guard++ < 100) sim.step();
  EXPECT_TRUE(sim.all_done());
}

TEST(Scheduler, RejectsPromptsNotShorterThanTheContext) {
  SchedulerConfig cfg{2, 8, 8};
  kv::KvPool pool(16);
  kv::ReqRows rows(2);
  Scheduler s(cfg, pool, rows);
  Sequence long_seq, empty_seq;
  long_seq.tokens.assign(8, 1);
  EXPECT_THROW(s.add(&long_seq), std::runtime_error);
  EXPECT_THROW(s.add(&empty_seq), std::runtime_error);
  EXPECT_THROW(Scheduler(SchedulerConfig{0, 8, 8}, pool, rows), std::runtime_error);
  EXPECT_THROW(Scheduler(SchedulerConfig{1, 0, 8}, pool, rows), std::runtime_error);
}

TEST(Scheduler, BenchShapedPrefillSplitsAtTheBudget) {
  // bench --batch 32 --prompt-len 4096: 131,072 prompt tokens. A 65,536-token budget prefills
  // them in chunks (16 prompts, then the first 16 decodes + 15 prompts + 4,080 tokens of the
  // 32nd); a budget of 131,072 or far more (no int overflow) takes all of them in one step.
  const int B = 32, P = 4096, ctx = P + 16;
  for (int budget : {65536, 131072, 1 << 30}) {
    SCOPED_TRACE(::testing::Message() << "budget " << budget);
    Sim sim(SchedulerConfig{B, budget, ctx}, B * ctx, B);
    for (int i = 0; i < B; ++i) sim.add(P, 4);
    auto tokens = [](const StepPlan& p) {
      int n = 0;
      for (const ScheduledSeq& it : p.items) n += it.num_tokens;
      return n;
    };
    StepPlan p = sim.step();
    if (budget == 65536) {
      ASSERT_EQ(p.items.size(), 16u);
      EXPECT_EQ(tokens(p), 65536);
      p = sim.step();
      ASSERT_EQ(p.items.size(), 32u);
      EXPECT_EQ(tokens(p), 65536);
      EXPECT_EQ(p.items[0].num_tokens, 1);  // decodes first
      EXPECT_EQ(p.items.back().num_tokens, P - 16);
      EXPECT_FALSE(p.items.back().sample);
      p = sim.step();
      EXPECT_EQ(tokens(p), 31 + 16);  // 31 decodes and the 32nd prompt's last 16 tokens
    } else {
      ASSERT_EQ(p.items.size(), 32u);
      EXPECT_EQ(tokens(p), B * P);
      for (const ScheduledSeq& it : p.items) EXPECT_TRUE(it.sample);
    }
    int guard = 0;
    while (!sim.all_done() && guard++ < 20) sim.step();
    ASSERT_TRUE(sim.all_done());
    EXPECT_EQ(sim.pool().num_used(), 0);
  }
}
