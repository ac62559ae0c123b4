// A request as the scheduler sees it: integers only (tokens, progress, KV slots).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace lite_llama {

struct Sequence {
  enum class State { Waiting, Running, Finished };

  int64_t id = 0;
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  int num_prompt = 0;
  int num_computed = 0;         // leading tokens whose K/V are in the pool
  int num_cached = 0;           // prompt tokens served by the prefix cache (usage.cached_tokens)
  int num_preemptions = 0;      // times preempted (num_cached is set at the first admission)
  int cache_cap = -1;           // >= 0: num_cached at most this (the engine cached the prompt itself)
  std::vector<int32_t> slots;   // KV slot of token i (i < slots.size())
  int32_t req_row = -1;         // row of the request -> slot table while running
  State state = State::Waiting;
  int64_t arrival = 0;          // admission order (FCFS)

  int num_tokens() const { return int(tokens.size()); }
  // Keys [0, leading_run(n)) of the first n are at slots slots[0] + i: a fresh pool hands a prompt
  // such a run, and decode attention then reads its K/V without the slot table. Amortised O(1) a
  // step: the run only grows while slots are appended; clear_slots() starts it again.
  int32_t leading_run(int n) const {
    n = std::min(n, int(slots.size()));
    if (n <= 0) return 0;
    if (run_len_ == 0 || run_slot_ != slots[0]) run_slot_ = slots[0], run_len_ = 1;
    while (run_len_ < n && slots[size_t(run_len_)] == run_slot_ + run_len_) ++run_len_;
    return std::min(run_len_, n);
  }
  void clear_slots() {
    slots.clear();
    run_len_ = 0;
  }
  int num_generated() const { return num_tokens() - num_prompt; }
  int num_pending() const { return num_tokens() - num_computed; }

 private:
  mutable int32_t run_slot_ = 0, run_len_ = 0;  // leading_run's cache
};

}  // namespace lite_llama
