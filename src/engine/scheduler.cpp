#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace lite_llama {

Scheduler::Scheduler(const SchedulerConfig& cfg, kv::KvPool& pool, kv::ReqRows& rows)
    : cfg_(cfg), pool_(pool), rows_(rows) {
  LL_CHECK(cfg.max_num_seqs >= 1 && cfg.max_batched_tokens >= 1 && cfg.max_ctx >= 2,
           "scheduler needs max_num_seqs >= 1, max_batched_tokens >= 1, ctx >= 2");
}

void Scheduler::add(Sequence* s) {
  LL_CHECK(s->num_tokens() >= 1 && s->num_tokens() < cfg_.max_ctx,
           "prompt of {} tokens does not fit the context of {} tokens", s->num_tokens(),
           cfg_.max_ctx);
  s->state = Sequence::State::Waiting;
  s->arrival = arrivals_++;
  waiting_.push_back(s);
}

void Scheduler::release(Sequence* s) {
  pool_.release(s->slots.data(), int32_t(s->slots.size()));
  s->slots.clear();
  if (s->req_row >= 0) rows_.release(s->req_row);
  s->req_row = -1;
}

void Scheduler::preempt(Sequence* s, StepPlan& plan) {
  // Recompute policy: drop the KV and prefill prompt + generated tokens again later.
  release(s);
  s->num_computed = 0;
  s->state = Sequence::State::Waiting;
  running_.erase(std::find(running_.begin(), running_.end(), s));
  waiting_.push_front(s);
  plan.preempted.push_back(s);
  ++preemptions_;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int budget = cfg_.max_batched_tokens;
  // Slots handed out in this plan; undone if the sequence is preempted later in the loop.
  std::vector<int32_t> fresh;

  // 1. Decodes of running sequences, oldest first; preempt the newest when slots run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* s = running_[i];
    if (s->num_pending() != 1 || s->num_computed == 0) {
      ++i;
      continue;
    }
    // A sampled token needs a slot; the last token of a chunked prompt has had one since
    // admission.
    if (int(s->slots.size()) < s->num_tokens()) {
      fresh.clear();
      while (!pool_.alloc(1, fresh)) {
        Sequence* victim = running_.back();
        // Items already planned for the victim are dropped with it.
        plan.items.erase(std::remove_if(plan.items.begin(), plan.items.end(),
                                        [&](const ScheduledSeq& it) { return it.seq == victim; }),
                         plan.items.end());
        preempt(victim, plan);
        if (victim == s) break;
      }
      if (s->state != Sequence::State::Running) continue;  // preempted itself; i now points past
      s->slots.push_back(fresh[0]);
    }
    plan.items.push_back({s, 1, true});
    --budget;
    ++i;
  }
  // 2. Running sequences still in their (chunked) prefill: slots were reserved at admission.
  for (Sequence* s : running_) {
    if (budget <= 0) break;
    if (s->num_pending() <= 1) continue;
    int n = std::min(s->num_pending(), budget);
    plan.items.push_back({s, n, s->num_computed + n == s->num_tokens()});
    budget -= n;
  }
  // 3. Admit waiting sequences first come, first served. A sequence gets the slots of all its
  // pending tokens at once, so a chunked prefill never stalls half-way for lack of slots.
  while (!waiting_.empty() && budget > 0 && int(running_.size()) < cfg_.max_num_seqs) {
    Sequence* s = waiting_.front();
    if (pool_.num_free() < s->num_pending() || rows_.num_free() == 0) break;  // keep FCFS order
    s->req_row = rows_.alloc();
    pool_.alloc(s->num_pending(), s->slots);
    s->state = Sequence::State::Running;
    waiting_.pop_front();
    running_.push_back(s);
    int n = std::min(s->num_pending(), budget);
    plan.items.push_back({s, n, s->num_computed + n == s->num_tokens()});
    budget -= n;
  }
  // Decodes first (the attention kernels split the batch there).
  std::stable_partition(plan.items.begin(), plan.items.end(),
                        [](const ScheduledSeq& it) { return it.num_tokens == 1; });
  return plan;
}

void Scheduler::commit(const StepPlan& plan) {
  for (const ScheduledSeq& it : plan.items) it.seq->num_computed += it.num_tokens;
}

void Scheduler::finish(Sequence* s) {
  if (s->state == Sequence::State::Running) {
    running_.erase(std::find(running_.begin(), running_.end(), s));
  } else if (s->state == Sequence::State::Waiting) {
    auto it = std::find(waiting_.begin(), waiting_.end(), s);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  release(s);
  s->state = Sequence::State::Finished;
}

}  // namespace lite_llama
