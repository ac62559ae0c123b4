// Token selection on the host: penalties, temperature, top-k / top-p / min-p, seeded RNG.
// Order as vLLM: penalties -> temperature -> top-k -> top-p -> min-p -> draw.
#pragma once
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "lite_llama/sampling_params.h"

namespace lite_llama::sampling {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

// Per-request state: RNG and the token counts the penalties need.
class SequenceSampler {
 public:
  SequenceSampler(const SamplingParams& p, const std::vector<int32_t>& prompt);

  // Picks the next token from raw logits[V] (modified in place). If top_logprobs >= 0 the
  // chosen token's logprob, its rank (1 + tokens with a strictly higher logprob, as vLLM) and
  // the best alternatives (from the raw distribution) are returned.
  // raw_logits: the distribution the logprobs come from where it is not `logits` (logit_bias is
  // in logits only: vLLM reports logprobs before its logits processors).
  int32_t sample(float* logits, int64_t vocab, float* chosen_logprob,
                 std::vector<TokenLogprob>* top, int32_t* chosen_rank = nullptr,
                 const float* raw_logits = nullptr);
  // Records a generated token (for presence/frequency/repetition penalties).
  void accept(int32_t token);
  const SamplingParams& params() const { return params_; }
  // Tokens the penalties touch, for device-side sampling: output count, or -1 for a token seen
  // only in the prompt (repetition penalty).
  void penalty_entries(std::vector<int32_t>& tokens, std::vector<int32_t>& counts) const;
  // The seed device-side sampling uses (the request's, or one drawn at creation).
  uint64_t seed() const { return seed_; }

 private:
  void apply_penalties(float* logits, int64_t vocab) const;
  void mark_seen(int32_t t);

  SamplingParams params_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> output_counts_;
  std::vector<int32_t> seen_;  // distinct prompt + output tokens (repetition penalty)
  std::vector<uint8_t> seen_mask_;
  std::vector<std::pair<float, int32_t>> cand_;  // scratch
};

// Index of the largest value (first on ties), as torch.argmax.
int32_t argmax(const float* x, int64_t n);
// log-softmax over x[0..n): x[chosen]'s value, its rank (1 + the count of logprobs strictly
// greater) and the k best.
void log_softmax_top(const float* x, int64_t n, int k, int32_t chosen, float* chosen_lp,
                     std::vector<TokenLogprob>* top, int32_t* chosen_rank = nullptr);

}  // namespace lite_llama::sampling
