// Public: how a request picks its tokens and when it stops.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lite_llama {

// A temperature below this is greedy (vLLM's _SAMPLING_EPS): 1 / t would overflow to inf for a
// subnormal t, and the draw be NaN.
constexpr float kGreedyTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 1.0f;         // 0 (or below kGreedyTemperature) = greedy (argmax)
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off
  float repetition_penalty = 1.0f;  // HF style, over prompt and output tokens; 1 = off
  float presence_penalty = 0.0f;    // OpenAI style, over output tokens
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;     // same seed, same prompt, same output
  int max_tokens = 256;
  // EOS, stop_token_ids and stop strings take effect only from this many output tokens on
  // (vLLM's min_tokens); <= max_tokens.
  int min_tokens = 0;
  std::vector<std::string> stop;    // stop strings (not in the output text unless the next is set)
  bool include_stop_str_in_output = false;  // vLLM's: the text ends with the stop string it met
  bool skip_special_tokens = true;          // vLLM's: control tokens' text is left out
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int top_logprobs = -1;            // -1: no logprobs; 0..20: chosen token + that many best
  // -1: none; 0..20: each prompt token's logprob and rank plus that many best at its position
  // (vLLM's prompt_logprobs), from a teacher-forced scoring of the prompt before it runs.
  int prompt_logprobs = -1;
  // Constrained decoding: a GBNF grammar (llama.cpp syntax, start rule "root") every output
  // must follow; "" = unconstrained. JSON Schema / regex / choices are compiled to GBNF by the
  // caller (src/grammar). The stop tokens are allowed only where the grammar may end.
  std::string grammar;
  // Added to the token's logit before sampling (OpenAI logit_bias), [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's allowed_token_ids: only these may be picked (unset = any; set, must not be empty).
  std::optional<std::vector<int32_t>> allowed_token_ids;
  // vLLM's bad_words: a word's last token is banned where its other tokens end the output so far.
  std::vector<std::string> bad_words;

  // Throws lite_llama::Error naming the first parameter out of range.
  void validate() const;
};

// Error: the request could not go on (a grammar that no token can continue); see
// RequestOutput::error.
enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);

}  // namespace lite_llama
