// Scheduler with a fake model: steps are simulated on integers (no weights). A fake KV store
// records which (sequence, position, token) each slot holds, so a sequence reading a slot that
// another one overwrote, or a recompute that skipped a token, is caught. Invariants are checked
// after every schedule() and after every step; random runs vary arrivals, pool sizes (small
// enough to force preemption), budgets and cancellations.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "kv/kv_pool.h"

using namespace lite_llama;

namespace {

struct KvEntry {
  int64_t id = -1;
  int pos = -1;
  int32_t token = -1;
  bool operator==(const KvEntry&) const = default;
};

class Sim {
 public:
  Sim(SchedulerConfig cfg, int32_t pool_slots, int32_t rows)
      : cfg_(cfg),
        pool_(pool_slots),
        rows_(rows),
        sched_(cfg, pool_, rows_),
        kv_(static_cast<size_t>(pool_slots)) {}

  // A request with `prompt` tokens that finishes after `gen` generated tokens (or at max_ctx).
  Sequence* add(int prompt, int gen) {
    auto s = std::make_unique<Sequence>();
    s->id = int64_t(seqs_.size());
    for (int i = 0; i < prompt; ++i) s->tokens.push_back(int32_t(1000 * s->id + i));
    s->num_prompt = prompt;
    Sequence* p = s.get();
    seqs_.push_back(std::move(s));
    shadow_.push_back(p->tokens);
    target_.push_back(gen);
    done_.push_back(false);
    arrival_.push_back(next_arrival_++);
    sched_.add(p);
    EXPECT_EQ(p->state, Sequence::State::Waiting);
    return p;
  }

  void cancel(Sequence* s) {
    sched_.finish(s);
    EXPECT_EQ(s->state, Sequence::State::Finished);
    EXPECT_TRUE(s->slots.empty());
    EXPECT_EQ(s->req_row, -1);
    done_[size_t(s->id)] = true;
    ++cancelled_;
    check_state("after cancel");
  }

  // One engine step: schedule, check the plan, run the fake model, commit, sample, finish.
  StepPlan step() {
    std::map<Sequence*, Sequence::State> before;
    for (auto& s : seqs_)
      if (!done_[size_t(s->id)]) before[s.get()] = s->state;
    StepPlan plan = sched_.schedule();
    check_plan(plan, before);
    check_state("after schedule");
    if (::testing::Test::HasFatalFailure()) return plan;
    forward(plan);
    sched_.commit(plan);
    for (const ScheduledSeq& it : plan.items) {
      Sequence* s = it.seq;
      EXPECT_LE(s->num_computed, s->num_tokens());
      if (!it.sample) continue;
      EXPECT_EQ(s->num_computed, s->num_tokens()) << "sampled before the last token was computed";
      const int32_t tok = int32_t(1000 * s->id + s->num_tokens());
      s->tokens.push_back(tok);
      shadow_[size_t(s->id)].push_back(tok);
      if (s->num_generated() >= target_[size_t(s->id)] || s->num_tokens() >= cfg_.max_ctx) {
        sched_.finish(s);
        EXPECT_EQ(s->state, Sequence::State::Finished);
        done_[size_t(s->id)] = true;
        ++finished_;
      }
    }
    check_state("after step");
    ++steps_;
    return plan;
  }

  bool all_done() const {
    return std::all_of(done_.begin(), done_.end(), [](bool d) { return d; });
  }
  std::vector<Sequence*> live() {
    std::vector<Sequence*> v;
    for (auto& s : seqs_)
      if (!done_[size_t(s->id)]) v.push_back(s.get());
    return v;
  }
  Scheduler& sched() { return sched_; }
  kv::KvPool& pool() { return pool_; }
  kv::ReqRows& rows() { return rows_; }
  int64_t preempted_total() const { return preempted_; }
  int steps() const { return steps_; }
  int finished() const { return finished_; }
  const std::vector<int32_t>& shadow(const Sequence* s) const { return shadow_[size_t(s->id)]; }

  void check_state(const char* when) {
    SCOPED_TRACE(when);
    std::set<int32_t> owned;
    std::set<int32_t> req_rows;
    int64_t held = 0;
    int running = 0, waiting = 0;
    for (auto& sp : seqs_) {
      Sequence* s = sp.get();
      if (done_[size_t(s->id)]) {
        ASSERT_EQ(s->state, Sequence::State::Finished) << "seq " << s->id;
        ASSERT_TRUE(s->slots.empty()) << "finished seq " << s->id << " still holds slots";
        continue;
      }
      ASSERT_EQ(s->tokens, shadow_[size_t(s->id)]) << "tokens of seq " << s->id << " changed";
      ASSERT_NE(s->state, Sequence::State::Finished) << "seq " << s->id;
      if (s->state == Sequence::State::Waiting) {
        ++waiting;
        ASSERT_TRUE(s->slots.empty()) << "waiting seq " << s->id << " holds slots";
        ASSERT_EQ(s->num_computed, 0) << "waiting seq " << s->id;
        ASSERT_EQ(s->req_row, -1) << "waiting seq " << s->id;
        continue;
      }
      ++running;
      ASSERT_GE(int(s->slots.size()), s->num_computed) << "seq " << s->id;
      // A request holds exactly the slots of its tokens: after schedule() every token has one;
      // between steps the freshly sampled token has none yet.
      ASSERT_LE(int(s->slots.size()), s->num_tokens()) << "seq " << s->id << " holds extra slots";
      ASSERT_TRUE(s->req_row >= 0 && s->req_row < rows_.capacity()) << "seq " << s->id;
      ASSERT_TRUE(req_rows.insert(s->req_row).second) << "request row " << s->req_row << " shared";
      for (int32_t slot : s->slots) {
        ASSERT_TRUE(slot >= 0 && slot < pool_.num_slots());
        ASSERT_EQ(pool_.refcount(slot), 1) << "slot " << slot;
        ASSERT_TRUE(owned.insert(slot).second)
            << "slot " << slot << " owned twice (seq " << s->id << ")";
      }
      held += int64_t(s->slots.size());
    }
    ASSERT_EQ(held, pool_.num_used());
    ASSERT_EQ(running, sched_.num_running());
    ASSERT_EQ(waiting, sched_.num_waiting());
    ASSERT_LE(running, cfg_.max_num_seqs);
    ASSERT_EQ(rows_.num_free(), rows_.capacity() - running);
  }

 private:
  void check_plan(const StepPlan& plan, const std::map<Sequence*, Sequence::State>& before) {
    int tokens = 0;
    bool seen_prefill = false;
    std::set<Sequence*> in_plan;
    for (const ScheduledSeq& it : plan.items) {
      Sequence* s = it.seq;
      ASSERT_TRUE(before.count(s)) << "planned a finished or unknown sequence";
      ASSERT_TRUE(in_plan.insert(s).second) << "seq " << s->id << " planned twice";
      ASSERT_EQ(s->state, Sequence::State::Running) << "seq " << s->id;
      ASSERT_GE(it.num_tokens, 1);
      ASSERT_LE(s->num_computed + it.num_tokens, s->num_tokens()) << "seq " << s->id;
      ASSERT_EQ(it.sample, s->num_computed + it.num_tokens == s->num_tokens()) << "seq " << s->id;
      ASSERT_EQ(int(s->slots.size()), s->num_tokens()) << "seq " << s->id << " after schedule";
      if (it.num_tokens > 1) seen_prefill = true;
      ASSERT_FALSE(it.num_tokens == 1 && seen_prefill) << "a q_len-1 item after a prefill chunk";
      tokens += it.num_tokens;
    }
    ASSERT_LE(tokens, cfg_.max_batched_tokens);
    ASSERT_LE(int(plan.items.size()), cfg_.max_num_seqs);
    // Preemption takes the newest: every victim arrived after every sequence still running.
    for (Sequence* s : plan.preempted) {
      ++preempted_;
      ASSERT_EQ(before.at(s), Sequence::State::Running);
      ASSERT_FALSE(in_plan.count(s)) << "preempted seq " << s->id << " still planned";
      if (s->state == Sequence::State::Waiting) {
        ASSERT_TRUE(s->slots.empty());
        ASSERT_EQ(s->num_computed, 0);
      }
      for (auto& [r, st] : before) {
        if (r->state == Sequence::State::Running && r != s) {
          ASSERT_LT(arrival_[size_t(r->id)], arrival_[size_t(s->id)])
              << "preempted seq " << s->id << " while older seq " << r->id << " kept running";
        }
      }
    }
    ASSERT_EQ(preempted_, sched_.num_preemptions());
    // FCFS: whatever was admitted now arrived before everything still waiting.
    int64_t max_admitted = -1, min_waiting = INT64_MAX;
    for (auto& [s, st] : before) {
      if (st == Sequence::State::Waiting && s->state == Sequence::State::Running)
        max_admitted = std::max(max_admitted, arrival_[size_t(s->id)]);
      if (s->state == Sequence::State::Waiting)
        min_waiting = std::min(min_waiting, arrival_[size_t(s->id)]);
    }
    ASSERT_LT(max_admitted, min_waiting) << "admission skipped an earlier waiting request";
  }

  // The fake model: a token at position p attends to positions [0, p] of its sequence, whose
  // slots must hold exactly what this sequence wrote there; then it writes its own slot.
  void forward(const StepPlan& plan) {
    for (const ScheduledSeq& it : plan.items) {
      Sequence* s = it.seq;
      for (int p = 0; p < s->num_computed; ++p)
        ASSERT_EQ(kv_[size_t(s->slots[size_t(p)])], (KvEntry{s->id, p, s->tokens[size_t(p)]}))
            << "seq " << s->id << " position " << p << ": its slot was overwritten";
      for (int p = s->num_computed; p < s->num_computed + it.num_tokens; ++p)
        kv_[size_t(s->slots[size_t(p)])] = KvEntry{s->id, p, s->tokens[size_t(p)]};
    }
  }

  SchedulerConfig cfg_;
  kv::KvPool pool_;
  kv::ReqRows rows_;
  Scheduler sched_;
  std::vector<KvEntry> kv_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::vector<std::vector<int32_t>> shadow_;
  std::vector<int> target_;
  std::vector<bool> done_;
  std::vector<int64_t> arrival_;
  int64_t next_arrival_ = 0;
  int64_t preempted_ = 0;
  int steps_ = 0, finished_ = 0, cancelled_ = 0;
};

}  // namespace

TEST(Scheduler, RandomWorkloadsKeepInvariantsAndFinish) {
  int64_t total_preemptions = 0, total_cancels = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uni = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    SchedulerConfig cfg;
    cfg.max_num_seqs = uni(1, 8);
    const int budgets[] = {1, 2, 3, 7, 16, 64, 512};
    cfg.max_batched_tokens = budgets[uni(0, 6)];
    cfg.max_ctx = uni(4, 64);
    // The engine's default pool holds at least one sequence at full context (see engine.cpp).
    const int32_t pool = uni(cfg.max_ctx, 3 * cfg.max_ctx);
    const int32_t rows = uni(1, cfg.max_num_seqs);
    Sim sim(cfg, pool, rows);
    const int num_requests = uni(5, 40);
    const int arrival_mode = uni(0, 2);  // 0: all at once, 1: trickle, 2: bursts
    const double cancel_p = uni(0, 1) ? 0.05 : 0.0;
    int added = 0;
    const int max_steps = 20000;
    while ((added < num_requests || !sim.all_done()) && sim.steps() < max_steps) {
      int arrivals = 0;
      if (added < num_requests) {
        if (arrival_mode == 0)
          arrivals = num_requests;
        else if (arrival_mode == 1)
          arrivals = uni(0, 3) == 0 ? 1 : 0;
        else
          arrivals = uni(0, 9) == 0 ? uni(1, 8) : 0;
      }
      for (int i = 0; i < arrivals && added < num_requests; ++i, ++added) {
        // The engine admits prompts shorter than both the context and the pool.
        const int prompt = uni(1, std::min(cfg.max_ctx - 1, int(pool) - 1));
        sim.add(prompt, uni(1, 30));
      }
      if (cancel_p > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < cancel_p) {
        auto live = sim.live();
        if (!live.empty()) {
          sim.cancel(live[size_t(uni(0, int(live.size()) - 1))]);
          ++total_cancels;
        }
      }
      sim.step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_TRUE(sim.all_done()) << "livelock: requests left after " << max_steps << " steps";
    EXPECT_EQ(sim.pool().num_used(), 0);
    EXPECT_EQ(sim.rows().num_free(), rows);
    EXPECT_EQ(sim.sched().num_running(), 0);
    EXPECT_EQ(sim.sched().num_waiting(), 0);
    EXPECT_TRUE(sim.sched().schedule().empty());
    total_preemptions += sim.sched().num_preemptions();
  }
  // The workloads must actually exercise preemption and cancellation.
  EXPECT_GT(total_preemptions, 100);
  EXPECT_GT(total_cancels, 50);
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
