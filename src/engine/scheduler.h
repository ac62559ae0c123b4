// Continuous batching: each step runs the decode token of every running sequence plus chunks of
// prompts (FCFS) within a token budget. Sequences are admitted by free KV slots and request rows;
// when the pool runs dry the newest running sequence is preempted (its slots freed, recomputed
// later). With a prefix cache, an admitted sequence starts from its longest cached prefix, the
// cache is evicted before anything is preempted, and finished or preempted sequences leave their
// computed tokens in it. Works on Sequence integers only, so it is tested without a model.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/sequence.h"
#include "kv/kv_pool.h"
#include "kv/radix_cache.h"

namespace lite_llama {

struct SchedulerConfig {
  int max_num_seqs = 8;         // running sequences at most
  int max_batched_tokens = 512; // tokens per step at most (decodes + prefill chunks)
  int max_ctx = 4096;           // tokens per sequence at most
  // Prompt tokens at most in a step that also decodes running sequences (0: the whole budget).
  // A long prompt's chunk sets that step's time, which is every stream's gap between tokens;
  // with no stream decoding the prompt takes the whole budget.
  int max_prefill_with_decodes = 0;
};

struct ScheduledSeq {
  Sequence* seq;
  int num_tokens;  // tokens of this step: [seq->num_computed, + num_tokens)
  bool sample;     // the chunk ends at the sequence's last token: its logits pick the next
  // The runner writes slots[table_start, num_computed + num_tokens) into the request row. Below
  // num_computed only on the step admitting a cached prefix: its slots came from the prefix
  // cache and are in no table yet (table_start is then 0).
  int table_start = 0;
};

struct StepPlan {
  std::vector<ScheduledSeq> items;  // decodes first, then prefill chunks
  std::vector<Sequence*> preempted;
  bool empty() const { return items.empty(); }
};

class Scheduler {
 public:
  // cache: automatic prefix caching, nullptr for none. It must use the same pool.
  Scheduler(const SchedulerConfig& cfg, kv::KvPool& pool, kv::ReqRows& rows,
            kv::RadixCache* cache = nullptr);

  void add(Sequence* s);
  // Plans the next step and allocates the KV slots of its tokens.
  StepPlan schedule();
  // After the forward pass: marks the planned tokens as computed; a sequence whose prefill just
  // ended leaves it in the prefix cache, so requests arriving while it decodes share it.
  void commit(const StepPlan& plan);
  // Removes a sequence (finished or cancelled) and frees its slots and row at once; its computed
  // tokens stay in the prefix cache.
  void finish(Sequence* s);

  int num_running() const { return int(running_.size()); }
  int num_waiting() const { return int(waiting_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  void release(Sequence* s);
  void preempt(Sequence* s, StepPlan& plan);
  bool admit(Sequence* s);

  SchedulerConfig cfg_;
  kv::KvPool& pool_;
  kv::ReqRows& rows_;
  kv::RadixCache* cache_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> waiting_;
  int64_t arrivals_ = 0;
  int64_t preemptions_ = 0;
};

}  // namespace lite_llama
