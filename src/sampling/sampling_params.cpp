#include <cmath>

#include "core/error.h"
#include "lite_llama/sampling_params.h"

namespace lite_llama {

void SamplingParams::validate() const {
  auto finite = [](float v) { return std::isfinite(v); };
  LL_CHECK(finite(temperature) && temperature >= 0 && temperature <= 100,
           "temperature must be in [0, 100], got {}", temperature);
  LL_CHECK(top_k >= 0, "top_k must be >= 0 (0 disables it), got {}", top_k);
  LL_CHECK(finite(top_p) && top_p > 0 && top_p <= 1, "top_p must be in (0, 1], got {}", top_p);
  LL_CHECK(finite(min_p) && min_p >= 0 && min_p <= 1, "min_p must be in [0, 1], got {}", min_p);
  LL_CHECK(finite(repetition_penalty) && repetition_penalty > 0 && repetition_penalty <= 10,
           "repetition_penalty must be in (0, 10], got {}", repetition_penalty);
  LL_CHECK(finite(presence_penalty) && std::fabs(presence_penalty) <= 2,
           "presence_penalty must be in [-2, 2], got {}", presence_penalty);
  LL_CHECK(finite(frequency_penalty) && std::fabs(frequency_penalty) <= 2,
           "frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  LL_CHECK(max_tokens >= 1, "max_tokens must be >= 1, got {}", max_tokens);
  LL_CHECK(min_tokens >= 0 && min_tokens <= max_tokens, "min_tokens must be in [0, max_tokens {}], got {}",
           max_tokens, min_tokens);
  LL_CHECK(top_logprobs >= -1 && top_logprobs <= 20, "top_logprobs must be in [0, 20], got {}",
           top_logprobs);
  LL_CHECK(prompt_logprobs >= -1 && prompt_logprobs <= 20, "prompt_logprobs must be in [0, 20], got {}",
           prompt_logprobs);
  for (const std::string& s : stop) LL_CHECK(!s.empty(), "stop strings must not be empty");
  LL_CHECK(stop.size() <= 16, "at most 16 stop strings, got {}", stop.size());
  LL_CHECK(logit_bias.size() <= 1024, "at most 1024 logit_bias entries, got {}", logit_bias.size());
  for (const auto& [tok, bias] : logit_bias) {
    LL_CHECK(tok >= 0, "logit_bias token id {} out of range", tok);
    LL_CHECK(finite(bias) && std::fabs(bias) <= 100, "logit_bias values must be in [-100, 100], got {}", bias);
  }
  if (allowed_token_ids) {
    LL_CHECK(!allowed_token_ids->empty(), "allowed_token_ids must not be empty");
    for (int32_t t : *allowed_token_ids) LL_CHECK(t >= 0, "allowed_token_ids holds token id {}, out of range", t);
  }
  LL_CHECK(bad_words.size() <= 128, "bad_words must hold at most 128 words, got {}", bad_words.size());
  for (const std::string& w : bad_words)
    LL_CHECK(w.find_first_not_of(" \t\n\r\f\v") != std::string::npos, "bad_words must not be empty or blank");
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    case FinishReason::None: break;
  }
  return "none";
}

}  // namespace lite_llama
