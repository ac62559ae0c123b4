// Scheduler with a fake model: steps are simulated on integers (no weights). A fake KV store
// records which (sequence, position, token, hash of the tokens up to it) each slot holds, and a
// fake request->slot table is written the way the runner must (from ScheduledSeq::table_start),
// so a sequence reading a slot that another one overwrote, a cached slot computed for another
// prefix, a table entry never written, or a recompute that skipped a token, is caught.
// Invariants are checked after every schedule() and after every step. With a prefix cache, the
// refcount of every slot must be (running sequences holding it) + (1 if the cache holds it).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/scheduler.h"
#include "kv/kv_pool.h"
#include "kv/radix_cache.h"

namespace lite_llama::test {

struct KvEntry {
  int64_t id = -1;
  int pos = -1;
  int32_t token = -1;
  uint64_t prefix = 0;  // hash of tokens [0, pos]: a K/V depends on all of them
  bool operator==(const KvEntry&) const = default;
};

inline uint64_t hash_step(uint64_t h, int32_t token) {
  return (h ^ uint64_t(uint32_t(token))) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
}

// The cache's slots (into `cached`), each of which must hold the K/V of its path's prefix.
inline void check_cache(const kv::RadixCache& cache, const std::vector<KvEntry>& kv,
                        std::set<int32_t>& cached) {
  cache.validate();
  cache.for_each_path([&](const std::vector<int32_t>& t, const std::vector<int32_t>& sl) {
    uint64_t h = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      h = hash_step(h, t[i]);
      cached.insert(sl[i]);
      const KvEntry& e = kv[size_t(sl[i])];
      EXPECT_TRUE(e.pos == int(i) && e.token == t[i] && e.prefix == h)
          << "cached slot " << sl[i] << " does not hold the K/V of its prefix";
    }
  });
  ASSERT_EQ(int32_t(cached.size()), cache.cached_tokens());
}

class Sim {
 public:
  Sim(SchedulerConfig cfg, int32_t pool_slots, int32_t rows, bool with_cache = false)
      : cfg_(cfg),
        pool_(pool_slots),
        rows_(rows),
        cache_(with_cache ? std::make_unique<kv::RadixCache>(pool_) : nullptr),
        sched_(cfg, pool_, rows_, cache_.get()),
        kv_(size_t(pool_slots)),
        table_(size_t(rows), std::vector<int32_t>(size_t(cfg.max_ctx), -1)) {}

  // A request with `prompt` distinct tokens that finishes after `gen` generated tokens (or at
  // max_ctx).
  Sequence* add(int prompt, int gen) {
    std::vector<int32_t> t;
    for (int i = 0; i < prompt; ++i) t.push_back(int32_t(1000 * int64_t(seqs_.size()) + i));
    return add(t, gen);
  }
  Sequence* add(const std::vector<int32_t>& prompt, int gen) {
    auto s = std::make_unique<Sequence>();
    s->id = int64_t(seqs_.size());
    s->tokens = prompt;
    s->num_prompt = int(prompt.size());
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
    // A failed check leaves the sim where it was: a caller looping until a sequence finishes
    // would spin forever, so the test stops here (gtest reports the exception as a failure).
    if (::testing::Test::HasFatalFailure()) throw std::runtime_error("scheduler sim: stopped at a failed check");
    forward(plan);
    if (::testing::Test::HasFatalFailure()) throw std::runtime_error("scheduler sim: stopped at a failed check");
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
  kv::RadixCache* cache() { return cache_.get(); }
  int steps() const { return steps_; }

  void check_state(const char* when) {
    SCOPED_TRACE(when);
    std::map<int32_t, int> holders;  // slot -> running sequences holding it
    std::set<int32_t> req_rows;
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
      ASSERT_LE(s->num_cached, s->num_prompt) << "seq " << s->id;
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
      std::set<int32_t> own;
      for (size_t p = 0; p < s->slots.size(); ++p) {
        const int32_t slot = s->slots[p];
        ASSERT_TRUE(slot >= 0 && slot < pool_.num_slots());
        ASSERT_TRUE(own.insert(slot).second) << "slot " << slot << " twice in seq " << s->id;
        ++holders[slot];
        // Positions still to be computed write their slot: it must be this sequence's alone.
        if (int(p) >= s->num_computed) {
          ASSERT_EQ(pool_.refcount(slot), 1) << "slot " << slot;
        }
      }
    }
    std::set<int32_t> cached;
    if (cache_) check_cache(*cache_, kv_, cached);
    if (::testing::Test::HasFatalFailure()) return;
    std::set<int32_t> used(cached);
    for (auto& [slot, n] : holders) {
      used.insert(slot);
      ASSERT_EQ(pool_.refcount(slot), n + int(cached.count(slot))) << "slot " << slot;
    }
    for (int32_t slot : cached) {
      if (!holders.count(slot)) {
        ASSERT_EQ(pool_.refcount(slot), 1) << "cached slot " << slot;
      }
    }
    ASSERT_EQ(int32_t(used.size()), pool_.num_used());
    ASSERT_EQ(running, sched_.num_running());
    ASSERT_EQ(waiting, sched_.num_waiting());
    ASSERT_LE(running, cfg_.max_num_seqs);
    ASSERT_EQ(rows_.num_free(), rows_.capacity() - running);
  }

 private:
  void check_plan(const StepPlan& plan, const std::map<Sequence*, Sequence::State>& before) {
    int tokens = 0, decodes = 0, prefill_tokens = 0;
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
      const bool admitted = before.at(s) == Sequence::State::Waiting;
      ASSERT_EQ(it.table_start, admitted ? 0 : s->num_computed) << "seq " << s->id;
      if (!cache_ && admitted) {
        ASSERT_EQ(s->num_computed, 0) << "seq " << s->id;
      }
      if (it.num_tokens > 1) seen_prefill = true;
      ASSERT_FALSE(it.num_tokens == 1 && seen_prefill) << "a q_len-1 item after a prefill chunk";
      tokens += it.num_tokens;
      // The scheduler's decode: a running sequence with one token left past computed ones.
      const bool decode = !admitted && it.num_tokens == 1 && s->num_computed > 0;
      decodes += decode;
      prefill_tokens += decode ? 0 : it.num_tokens;
    }
    ASSERT_LE(tokens, cfg_.max_batched_tokens);
    if (decodes > 0 && cfg_.max_prefill_with_decodes > 0) {
      ASSERT_LE(prefill_tokens, cfg_.max_prefill_with_decodes) << "prompt tokens beside decodes";
    }
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

  // The fake model. The runner's table update first: slots[table_start, end) into the row. Then
  // a token at position p attends to positions [0, p] of its sequence through the table; their
  // slots must hold the K/V of exactly this sequence's tokens there; then it writes its own.
  void forward(const StepPlan& plan) {
    for (const ScheduledSeq& it : plan.items) {
      Sequence* s = it.seq;
      std::vector<int32_t>& row = table_[size_t(s->req_row)];
      const int end = s->num_computed + it.num_tokens;
      for (int p = it.table_start; p < end; ++p) row[size_t(p)] = s->slots[size_t(p)];
      // The run the runner passes to attention: keys [0, run) at slots row[0] + i, the longest such.
      int run = 0;
      while (run < end && row[size_t(run)] == row[0] + run) ++run;
      ASSERT_EQ(s->leading_run(end), run) << "seq " << s->id << " leading run of " << end << " keys";
      (run == end ? full_runs_ : run > 1 ? partial_runs_ : short_runs_) += 1;
      uint64_t h = 0;
      for (int p = 0; p < end; ++p) {
        h = hash_step(h, s->tokens[size_t(p)]);
        const int32_t slot = row[size_t(p)];
        ASSERT_EQ(slot, s->slots[size_t(p)]) << "seq " << s->id << " table entry " << p;
        const KvEntry want{s->id, p, s->tokens[size_t(p)], h};
        if (p >= s->num_computed) {
          kv_[size_t(slot)] = want;
        } else if (cache_) {  // a cached slot was computed by whichever sequence cached it
          ASSERT_TRUE(kv_[size_t(slot)].pos == p && kv_[size_t(slot)].prefix == h)
              << "seq " << s->id << " position " << p << ": its slot holds another prefix";
        } else {
          ASSERT_EQ(kv_[size_t(slot)], want)
              << "seq " << s->id << " position " << p << ": its slot was overwritten";
        }
      }
    }
  }

 public:
  // Steps' sequences whose keys were one contiguous run, began with one, or did not (forward()).
  int64_t full_runs_ = 0, partial_runs_ = 0, short_runs_ = 0;

 private:
  SchedulerConfig cfg_;
  kv::KvPool pool_;
  kv::ReqRows rows_;
  std::unique_ptr<kv::RadixCache> cache_;
  Scheduler sched_;
  std::vector<KvEntry> kv_;
  std::vector<std::vector<int32_t>> table_;  // request row -> slot of each position
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::vector<std::vector<int32_t>> shadow_;
  std::vector<int> target_;
  std::vector<bool> done_;
  std::vector<int64_t> arrival_;
  int64_t next_arrival_ = 0;
  int64_t preempted_ = 0;
  int steps_ = 0, finished_ = 0, cancelled_ = 0;
};

// A random scheduler shape: up to 8 sequences, step budgets from 1 token, contexts of 4-64; a
// pool of 1-3 full contexts (the engine's default pool holds at least one, see engine_setup)
// and up to max_num_seqs request rows.
struct RandomShape {
  SchedulerConfig cfg;
  int32_t pool = 0, rows = 0;
};
template <typename Uni>
RandomShape random_shape(Uni& uni) {
  RandomShape r;
  r.cfg.max_num_seqs = uni(1, 8);
  const int budgets[] = {1, 2, 3, 7, 16, 64, 512};
  r.cfg.max_batched_tokens = budgets[uni(0, 6)];
  r.cfg.max_ctx = uni(4, 64);
  r.pool = uni(r.cfg.max_ctx, 3 * r.cfg.max_ctx);
  r.rows = uni(1, r.cfg.max_num_seqs);
  r.cfg.max_prefill_with_decodes = uni(0, 2) == 0 ? uni(1, 8) : 0;
  return r;
}

// Requests arriving this step in a random workload: mode 0 all at once, 1 a trickle, 2 bursts.
template <typename Uni>
int arrivals_this_step(int mode, int added, int num_requests, Uni& uni) {
  if (added >= num_requests) return 0;
  if (mode == 0) return num_requests;
  if (mode == 1) return uni(0, 3) == 0 ? 1 : 0;
  return uni(0, 9) == 0 ? uni(1, 8) : 0;
}

// With probability p, cancels a random live request; true when one was.
template <typename Rng, typename Uni>
bool cancel_some(Sim& sim, double p, Rng& rng, Uni& uni) {
  if (p <= 0 || std::uniform_real_distribution<double>(0, 1)(rng) >= p) return false;
  auto live = sim.live();
  if (live.empty()) return false;
  sim.cancel(live[size_t(uni(0, int(live.size()) - 1))]);
  return true;
}

// After a workload: nothing running or waiting, every row free, `used` slots still taken.
inline void expect_drained(Sim& sim, int32_t used, int32_t rows) {
  EXPECT_EQ(sim.pool().num_used(), used);
  EXPECT_EQ(sim.rows().num_free(), rows);
  EXPECT_EQ(sim.sched().num_running(), 0);
  EXPECT_EQ(sim.sched().num_waiting(), 0);
}

}  // namespace lite_llama::test
