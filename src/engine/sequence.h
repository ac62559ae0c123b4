// A request as the scheduler sees it: integers only (tokens, progress, KV slots).
#pragma once
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
  std::vector<int32_t> slots;   // KV slot of token i (i < slots.size())
  int32_t req_row = -1;         // row of the request -> slot table while running
  State state = State::Waiting;
  int64_t arrival = 0;          // admission order (FCFS)

  int num_tokens() const { return int(tokens.size()); }
  int num_generated() const { return num_tokens() - num_prompt; }
  int num_pending() const { return num_tokens() - num_computed; }
};

}  // namespace lite_llama
