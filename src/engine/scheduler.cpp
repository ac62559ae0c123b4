#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace lite_llama {

Scheduler::Scheduler(const SchedulerConfig& cfg, kv::KvPool& pool, kv::ReqRows& rows,
                     kv::RadixCache* cache)
    : cfg_(cfg), pool_(pool), rows_(rows), cache_(cache) {
  LL_CHECK(cfg.max_num_seqs >= 1 && cfg.max_batched_tokens >= 1 && cfg.max_ctx >= 2 &&
               cfg.max_prefill_with_decodes >= 0,
           "scheduler needs max_num_seqs >= 1, max_batched_tokens >= 1, ctx >= 2, "
           "max_prefill_with_decodes >= 0");
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
  // Only the tokens whose K/V are written go to the cache, not the slots reserved for the rest
  // of a chunked prompt. The cache takes its own references before ours are dropped.
  if (cache_ && s->num_computed > 0)
    cache_->insert(s->tokens.data(), s->slots.data(), int32_t(s->num_computed));
  pool_.release(s->slots.data(), int32_t(s->slots.size()));
  s->clear_slots();
  if (s->req_row >= 0) rows_.release(s->req_row);
  s->req_row = -1;
}

void Scheduler::preempt(Sequence* s, StepPlan& plan) {
  // Recompute policy: drop the KV and prefill prompt + generated tokens again later.
  release(s);
  s->num_computed = 0;
  ++s->num_preemptions;
  s->state = Sequence::State::Waiting;
  running_.erase(std::find(running_.begin(), running_.end(), s));
  waiting_.push_front(s);
  plan.preempted.push_back(s);
  ++preemptions_;
}

bool Scheduler::admit(Sequence* s) {
  if (rows_.num_free() == 0) return false;
  // Slots a sequence brings are K/V the engine computed already (a prompt scored for its logprobs
  // without the cache); the table takes them as it takes a cached prefix.
  int matched = int(s->slots.size());
  if (cache_ && matched == 0) {
    // At most n - 1 tokens: the last one is always computed, its logits pick the next token.
    matched = cache_->match(s->tokens.data(), s->num_tokens() - 1, s->slots);
    pool_.retain(s->slots.data(), matched);  // ours now: evict() below cannot take them
  }
  const int need = s->num_tokens() - matched;
  if (cache_ && pool_.num_free() < need) {
    const int missing = need - pool_.num_free();
    // Evict only when that admits the sequence: a blocked head should not empty the cache. The
    // slots only the tree holds bound what eviction can free (O(1)); they are evictable but for
    // the rare slot under a held descendant (two requests that computed one prefix at once), so
    // the bound decides without walking the tree. Each evict() walks the leaves once, so it
    // frees at least 1/64 of the pool at a time: admissions into a full pool share the walks.
    const int32_t unheld = cache_->num_unheld();
    if (unheld >= missing) cache_->evict(std::max(missing, std::min(unheld, pool_.num_slots() / 64)));
  }
  if (pool_.num_free() < need) {
    pool_.release(s->slots.data(), int32_t(s->slots.size()));
    s->clear_slots();
    return false;
  }
  s->req_row = rows_.alloc();
  pool_.alloc(need, s->slots);
  s->num_computed = matched;
  if (cache_ && s->num_preemptions == 0) {
    // A prompt the engine cached itself (scored for prompt logprobs) counts only what was cached
    // before it, in the usage and in the cache's statistics.
    const int hit = s->cache_cap >= 0 ? std::min(matched, s->cache_cap) : matched;
    s->num_cached = std::min(hit, s->num_prompt);
    cache_->record_lookup(s->num_tokens(), hit);
  }
  return true;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int budget = cfg_.max_batched_tokens;
  // Slots handed out in this plan; undone if the sequence is preempted later in the loop.
  std::vector<int32_t> fresh;
  // A decode whose sampled token has no slot yet; the prefix cache is evicted for these at once.
  auto needs_slot = [](const Sequence* s) {
    return s->num_pending() == 1 && s->num_computed > 0 && int(s->slots.size()) < s->num_tokens();
  };
  int slots_wanted = 0;
  if (cache_) {
    for (const Sequence* s : running_) slots_wanted += needs_slot(s);
  }

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
        // Unused cached prefixes go before running work (a victim's tokens land there too).
        if (cache_ && cache_->evict(std::max(1, slots_wanted)) > 0) continue;
        Sequence* victim = running_.back();
        if (needs_slot(victim)) --slots_wanted;
        // Items already planned for the victim are dropped with it.
        plan.items.erase(std::remove_if(plan.items.begin(), plan.items.end(),
                                        [&](const ScheduledSeq& it) { return it.seq == victim; }),
                         plan.items.end());
        preempt(victim, plan);
        if (victim == s) break;
      }
      if (s->state != Sequence::State::Running) continue;  // preempted itself; i now points past
      s->slots.push_back(fresh[0]);
      --slots_wanted;
    }
    plan.items.push_back({s, 1, true, s->num_computed});
    --budget;
    ++i;
  }
  // Beside decodes, prompts get at most max_prefill_with_decodes of what is left.
  if (!plan.items.empty() && cfg_.max_prefill_with_decodes > 0)
    budget = std::min(budget, cfg_.max_prefill_with_decodes);
  // 2. Running sequences still in their (chunked) prefill: slots were reserved at admission.
  for (Sequence* s : running_) {
    if (budget <= 0) break;
    if (s->num_pending() <= 1) continue;
    int n = std::min(s->num_pending(), budget);
    plan.items.push_back({s, n, s->num_computed + n == s->num_tokens(), s->num_computed});
    budget -= n;
  }
  // 3. Admit waiting sequences first come, first served. A sequence gets the slots of all its
  // pending tokens at once, so a chunked prefill never stalls half-way for lack of slots.
  // Not after a preemption: the victim, first in line, would come straight back through its
  // cached tokens and thrash (without a cache it cannot fit then anyway).
  while (plan.preempted.empty() && !waiting_.empty() && budget > 0 &&
         int(running_.size()) < cfg_.max_num_seqs) {
    Sequence* s = waiting_.front();
    if (!admit(s)) break;  // keep FCFS order
    s->state = Sequence::State::Running;
    waiting_.pop_front();
    running_.push_back(s);
    int n = std::min(s->num_pending(), budget);
    // table_start 0: the cached prefix's slots go into the new request row with this chunk.
    plan.items.push_back({s, n, s->num_computed + n == s->num_tokens(), 0});
    budget -= n;
  }
  // Decodes first (the attention kernels split the batch there).
  std::stable_partition(plan.items.begin(), plan.items.end(),
                        [](const ScheduledSeq& it) { return it.num_tokens == 1; });
  return plan;
}

void Scheduler::commit(const StepPlan& plan) {
  for (const ScheduledSeq& it : plan.items) {
    Sequence* s = it.seq;
    s->num_computed += it.num_tokens;
    if (cache_ && it.sample && it.num_tokens > 1)
      cache_->insert(s->tokens.data(), s->slots.data(), s->num_computed);
  }
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
